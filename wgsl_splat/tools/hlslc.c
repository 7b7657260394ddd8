/* hlslc: compile HLSL with Microsoft's compilers, as wgpu's DX12 backend calls them.
 *
 *   hlslc.exe fxc|dxc COMPILER.dll FILE.hlsl ENTRY PROFILE
 *   hlslc.exe batch JOBS.txt      (one job a line: fxc|dxc<TAB>dll<TAB>file<TAB>entry<TAB>profile)
 *
 * fxc: D3DCompile of d3dcompiler_47.dll with D3DCOMPILE_ENABLE_STRICTNESS (wgpu-hal's flags);
 * dxc: IDxcCompiler3::Compile of dxcompiler.dll with wgpu-hal's arguments: -E ENTRY -T PROFILE
 *      -HV 2018 -no-warnings -Ges (strictness) -Vd (no validator: the DLL alone).
 * Prints the compiler's messages and "ok <bytes> bytes"; exit 0 on success, 1 on a compile error,
 * 2 on a usage or loading error. A batch (one process for many files: Wine starts once) prints
 * "### BEGIN i", the job's output, "### END i <status> <milliseconds>" per job. Built with
 * mingw-w64 and run under Wine by wgsl_splat/tools/portability.py; Windows runs it as well. */
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- FXC ---------------------------------------------------------------------------------- */
typedef struct Blob Blob;
typedef struct BlobVtbl {
    HRESULT (WINAPI *QueryInterface)(Blob *, REFIID, void **);
    ULONG (WINAPI *AddRef)(Blob *);
    ULONG (WINAPI *Release)(Blob *);
    void *(WINAPI *GetBufferPointer)(Blob *);
    SIZE_T (WINAPI *GetBufferSize)(Blob *);
} BlobVtbl;
struct Blob { const BlobVtbl *v; };

typedef HRESULT (WINAPI *D3DCompileFn)(const void *, SIZE_T, const char *, const void *, void *,
                                       const char *, const char *, UINT, UINT, Blob **, Blob **);
#define D3DCOMPILE_ENABLE_STRICTNESS (1 << 11)

static void print_blob(Blob *b) {
    if (b && b->v->GetBufferSize(b)) {
        fwrite(b->v->GetBufferPointer(b), 1, b->v->GetBufferSize(b), stdout);
        putchar('\n');
    }
}

static int run_fxc(HMODULE dll, const char *src, size_t len, const char *entry, const char *profile) {
    D3DCompileFn compile = (D3DCompileFn)(void *)GetProcAddress(dll, "D3DCompile");
    if (!compile) { printf("D3DCompile not found\n"); return 2; }
    Blob *code = NULL, *errors = NULL;
    HRESULT hr = compile(src, len, "shader.hlsl", NULL, NULL, entry, profile,
                         D3DCOMPILE_ENABLE_STRICTNESS, 0, &code, &errors);
    print_blob(errors);
    if (FAILED(hr) || !code) { printf("failed (hr 0x%08lx)\n", (unsigned long)hr); return 1; }
    printf("ok %lu bytes\n", (unsigned long)code->v->GetBufferSize(code));
    return 0;
}

/* --- DXC (the few COM interfaces of dxcapi.h used here) ------------------------------------ */
typedef struct { const void *Ptr; SIZE_T Size; UINT Encoding; } DxcBuffer;
typedef struct Compiler3 Compiler3;
typedef struct Compiler3Vtbl {
    HRESULT (WINAPI *QueryInterface)(Compiler3 *, REFIID, void **);
    ULONG (WINAPI *AddRef)(Compiler3 *);
    ULONG (WINAPI *Release)(Compiler3 *);
    HRESULT (WINAPI *Compile)(Compiler3 *, const DxcBuffer *, const WCHAR **, UINT32, void *,
                              REFIID, void **);
    HRESULT (WINAPI *Disassemble)(Compiler3 *, const DxcBuffer *, REFIID, void **);
} Compiler3Vtbl;
struct Compiler3 { const Compiler3Vtbl *v; };

typedef struct Result Result;   /* IDxcResult : IDxcOperationResult */
typedef struct ResultVtbl {
    HRESULT (WINAPI *QueryInterface)(Result *, REFIID, void **);
    ULONG (WINAPI *AddRef)(Result *);
    ULONG (WINAPI *Release)(Result *);
    HRESULT (WINAPI *GetStatus)(Result *, HRESULT *);
    HRESULT (WINAPI *GetResult)(Result *, Blob **);
    HRESULT (WINAPI *GetErrorBuffer)(Result *, Blob **);
} ResultVtbl;
struct Result { const ResultVtbl *v; };

typedef HRESULT (WINAPI *DxcCreateInstanceFn)(REFCLSID, REFIID, void **);
static const GUID CLSID_DxcCompiler =
    {0x73e22d93, 0xe6ce, 0x47f3, {0xb5, 0xbf, 0xf0, 0x66, 0x4f, 0x39, 0xc1, 0xb0}};
static const GUID IID_IDxcCompiler3 =
    {0x228b4687, 0x5a6a, 0x4730, {0x90, 0x0c, 0x97, 0x02, 0xb2, 0x20, 0x3f, 0x54}};
static const GUID IID_IDxcOperationResult =
    {0xcedb484a, 0xd4e9, 0x445a, {0xb9, 0x91, 0xca, 0x21, 0xca, 0x15, 0x7d, 0xc2}};

static WCHAR *widen(const char *s) {
    int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
    WCHAR *w = malloc(sizeof(WCHAR) * n);
    MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n);
    return w;
}

static int run_dxc(HMODULE dll, const char *src, size_t len, const char *entry, const char *profile) {
    DxcCreateInstanceFn create = (DxcCreateInstanceFn)(void *)GetProcAddress(dll, "DxcCreateInstance");
    if (!create) { printf("DxcCreateInstance not found\n"); return 2; }
    Compiler3 *compiler = NULL;
    HRESULT hr = create(&CLSID_DxcCompiler, &IID_IDxcCompiler3, (void **)&compiler);
    if (FAILED(hr) || !compiler) { printf("DxcCreateInstance failed (hr 0x%08lx)\n", (unsigned long)hr); return 2; }
    const WCHAR *args[] = {L"-E", widen(entry), L"-T", widen(profile), L"-HV", L"2018", L"-no-warnings", L"-Ges", L"-Vd"};
    DxcBuffer buf = {src, len, 65001 /* UTF-8 */};
    Result *result = NULL;
    hr = compiler->v->Compile(compiler, &buf, args, sizeof(args) / sizeof(args[0]), NULL,
                              &IID_IDxcOperationResult, (void **)&result);
    if (FAILED(hr) || !result) { printf("Compile call failed (hr 0x%08lx)\n", (unsigned long)hr); return 2; }
    HRESULT status = E_FAIL;
    result->v->GetStatus(result, &status);
    Blob *errors = NULL;
    if (SUCCEEDED(result->v->GetErrorBuffer(result, &errors))) print_blob(errors);
    if (FAILED(status)) { printf("failed (hr 0x%08lx)\n", (unsigned long)status); return 1; }
    Blob *code = NULL;
    result->v->GetResult(result, &code);
    printf("ok %lu bytes\n", (unsigned long)(code ? code->v->GetBufferSize(code) : 0));
    return 0;
}

static char *read_file(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *src = malloc(*len + 1);
    if (fread(src, 1, *len, f) != (size_t)*len) { fclose(f); free(src); return NULL; }
    src[*len] = 0;
    fclose(f);
    return src;
}

static int compile_one(const char *compiler, const char *dll_path, const char *file,
                       const char *entry, const char *profile) {
    static char loaded_path[2][MAX_PATH];
    static HMODULE loaded[2];
    int which = !strcmp(compiler, "dxc");
    if (strcmp(compiler, "fxc") && strcmp(compiler, "dxc")) { printf("unknown compiler %s\n", compiler); return 2; }
    if (!loaded[which] || strcmp(loaded_path[which], dll_path)) {
        loaded[which] = LoadLibraryA(dll_path);
        if (!loaded[which]) { printf("cannot load %s (error %lu)\n", dll_path, GetLastError()); return 2; }
        strncpy(loaded_path[which], dll_path, MAX_PATH - 1);
    }
    long len = 0;
    char *src = read_file(file, &len);
    if (!src) { printf("cannot read %s\n", file); return 2; }
    int rc = which ? run_dxc(loaded[which], src, len, entry, profile)
                   : run_fxc(loaded[which], src, len, entry, profile);
    free(src);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "batch")) {
        FILE *jobs = fopen(argv[2], "r");
        if (!jobs) { printf("cannot read %s\n", argv[2]); return 2; }
        char line[4 * MAX_PATH];
        int i = 0, worst = 0;
        LARGE_INTEGER freq, t0, t1;
        QueryPerformanceFrequency(&freq);
        while (fgets(line, sizeof line, jobs)) {
            line[strcspn(line, "\r\n")] = 0;
            if (!line[0]) continue;
            char *f[5];
            int n = 0;
            for (char *tok = strtok(line, "\t"); tok && n < 5; tok = strtok(NULL, "\t")) f[n++] = tok;
            printf("### BEGIN %d\n", i);
            QueryPerformanceCounter(&t0);
            int rc = n == 5 ? compile_one(f[0], f[1], f[2], f[3], f[4]) : (printf("bad job line\n"), 2);
            QueryPerformanceCounter(&t1);
            printf("### END %d %d %.0f\n", i, rc, 1000.0 * (t1.QuadPart - t0.QuadPart) / freq.QuadPart);
            fflush(stdout);
            if (rc > worst) worst = rc;
            i++;
        }
        fclose(jobs);
        return worst;
    }
    if (argc != 6) {
        printf("usage: hlslc fxc|dxc COMPILER.dll FILE.hlsl ENTRY PROFILE | hlslc batch JOBS.txt\n");
        return 2;
    }
    int rc = compile_one(argv[1], argv[2], argv[3], argv[4], argv[5]);
    fflush(stdout);
    return rc;
}
