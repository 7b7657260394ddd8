// Open a page in headless chromium (driven by playwright-core); once READY_FILE exists (the test
// creates it when the server has sent its first frame), wait until the page has settled (three
// identical screenshots in a row) and save the last one.
// usage: node screenshot.mjs PLAYWRIGHT_CORE_DIR CHROMIUM URL OUT.png WIDTH HEIGHT TIMEOUT_S READY_FILE
import { pathToFileURL } from 'node:url';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [pwDir, chromiumPath, url, out, width, height, timeoutS, readyFile] = process.argv.slice(2);
const { chromium } = await import(pathToFileURL(join(pwDir, 'index.mjs')).href);
const userDataDir = mkdtempSync(join(tmpdir(), 'wgsl-splat-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: Number(width), height: Number(height) },
    deviceScaleFactor: 1,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--ignore-gpu-blocklist'],
});
const deadline = Date.now() + 1000 * Number(timeoutS);
const page = context.pages()[0] ?? await context.newPage();
const log = [];
page.on('console', msg => log.push(`console ${msg.type()}: ${msg.text()}`));
page.on('pageerror', err => log.push(`pageerror: ${err.message}`));
try {
    await page.goto(url, { waitUntil: 'load' });
    await page.waitForSelector('canvas', { timeout: 1000 * Number(timeoutS) });
    while (!existsSync(readyFile) && Date.now() < deadline) await page.waitForTimeout(100);
    let previous = null;
    let shot = null;
    let stable = 0;
    while (Date.now() < deadline) {
        await page.waitForTimeout(700);
        shot = await page.screenshot({ type: 'png' });
        stable = previous !== null && shot.equals(previous) ? stable + 1 : 0;
        previous = shot;
        if (stable >= 2) break;
    }
    writeFileSync(out, shot);
    // GUI over the canvas (the control panel, notifications): their boxes, to leave out
    const overlays = await page.evaluate(() => Array.from(document.querySelectorAll(
        '[class*="mantine-Paper-root"], [class*="mantine-Notification-root"]'))
        .map(e => e.getBoundingClientRect()).filter(r => r.width > 0 && r.height > 0)
        .map(r => [r.left, r.top, r.right, r.bottom]));
    console.log(JSON.stringify({ stable: stable >= 2, overlays, log }));
} finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
}
