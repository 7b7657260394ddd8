"""The commands' flags are declared records (app/flags.py): the click parameters are generated
from them, and no function of the application takes a long list of parameters instead."""

import ast
import pathlib

import click
import pytest

from wgsl_splat import options
from wgsl_splat.app.cli import main
from wgsl_splat.app.flags import flags_of, split_request
from wgsl_splat.app.run_request import RunRequest

APP = pathlib.Path(__file__).resolve().parents[1] / "wgsl_splat" / "app"
MOST_PARAMETERS = 8


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    names += [f"*{a.vararg.arg}"] if a.vararg else []
    names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def test_no_function_of_the_app_takes_more_than_eight_parameters():
    """Every function and method of wgsl_splat/app/, nested ones included (self and cls not
    counted): a command's flags travel as its request record, not one parameter each."""
    long = []
    for path in sorted(APP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = parameters(node)
                if len(names) > MOST_PARAMETERS:
                    long.append(f"{path.name}:{node.lineno} {node.name}({', '.join(names)})")
    assert not long, "more than 8 parameters:\n" + "\n".join(long)


def test_the_run_request_declares_trains_run_level_flags():
    """Each field of RunRequest is one of train's parameters, in the field order (before the
    configuration's flags), and the record click builds from no flags is the record's defaults."""
    command = main.commands["train"]
    names = [p.name for p in command.params]
    fields = list(flags_of(RunRequest))
    assert names[:len(fields)] == fields
    assert isinstance(command.params[0], click.Argument)
    values = command.make_context("train", []).params
    assert split_request(RunRequest, values)[0] == RunRequest()


def test_a_resumed_run_checks_and_keeps_the_declared_flags():
    rules = RunRequest.resume_rules()
    assert {name: rule[:2] for name, rule in rules.items()} == {
        "data": ("agree", "DATA"), "preset": ("agree", "--preset"),
        "eval_split": ("agree", "--eval"), "resolution": ("agree", "-r/--resolution"),
        "device": ("kept", "--device"), "frames": ("agree", "--frames"),
        "max_side": ("agree", "--max-side"), "sfm_side": ("agree", "--sfm-side"),
        "matcher": ("agree", "--matcher"), "mapper": ("agree", "--mapper")}
    request = RunRequest(data="default", resolution=2, device="auto")
    assert list(request.run_info()) == ["data", "resolution", "eval_split", "preset",
                                        "device_option", "sfm_frames", "sfm_max_side",
                                        "sfm_side", "sfm_matcher", "sfm_mapper"]
    assert {key for _, _, key in rules.values()} == set(request.run_info())


def configured(*args):
    """The configuration ``train ARGS`` starts from (the command line parsed, nothing trained)."""
    from wgsl_splat.app.config_cli import configure, given_config_flags

    ctx = main.commands["train"].make_context("train", list(args))
    request, flags = split_request(RunRequest, ctx.params)
    return configure(request.preset, flags.get("strategy"), given_config_flags(ctx), flags)


def test_the_fast_preset_alone_is_the_fast_mode():
    """``--preset fast`` selects the fast strategy and its schedule (Fast.run_presets), as
    ``--strategy fast --preset fast`` does (the README's main command)."""
    from wgsl_splat.strategy.fast import Fast
    from wgsl_splat.training.config import make_config, preset_strategy

    assert preset_strategy("fast") == "fast"
    assert preset_strategy("smoke") == preset_strategy("default") == "adc"
    for cfg in (make_config("fast"), configured("--preset", "fast"),
                configured("--strategy", "fast", "--preset", "fast")):
        assert cfg.strategy == "fast" and cfg.iters == 5000
        for key, value in Fast.run_presets["fast"].items():
            assert options.get_path(cfg, key) == value, key
    assert configured("--preset", "fast").to_dict() == make_config("fast", "fast").to_dict()


def test_a_named_strategy_gets_the_presets_schedule_for_it():
    """``--preset fast --strategy adc`` is 3DGS's 7 000-step protocol (docs/benchmarks.md's
    figures): evaluations to 7 000, the SH degree every 1 000 steps."""
    from wgsl_splat.training.config import make_config

    for cfg in (configured("--preset", "fast", "--strategy", "adc"), make_config("fast", "adc")):
        assert cfg.strategy == "adc" and cfg.iters == 7000
        assert cfg.eval_at == (1000, 2000, 3000, 7000) and cfg.sh_increase_every == 1000
    assert configured("--preset", "fast", "--strategy", "mcmc").iters == 7000
    assert configured().strategy == configured("--preset", "smoke").strategy == "adc"
    with pytest.raises(click.UsageError, match="is an option of --strategy mcmc, and this run "
                                               "trains fast"):
        configured("--preset", "fast", "--cap-max", "5")


def test_a_flag_the_strategies_share_sets_the_trained_strategys_option():
    """``--validation-every-nth`` is declared once, with the split/clone/prune options ADC and the
    fast mode share: one flag that sets the option of the strategy the run trains, refused for
    one without it, compared with the resumed run's own section."""
    from wgsl_splat.app.config_cli import config_flags
    from wgsl_splat.app.run_request import ResumeCheck
    from wgsl_splat.errors import UserError
    from wgsl_splat.training.config import make_config

    flag = next(cf for cf in config_flags() if cf.name == "--validation-every-nth")
    assert flag.sections == "adc or fast"
    for strategy, other in (("adc", "fast"), ("fast", "adc")):
        cfg = configured("--preset", "fast", "--strategy", strategy, "--validation-every-nth", "0")
        assert options.get_path(cfg, f"{strategy}.validation_every_nth") == 0
        assert options.get_path(cfg, f"{other}.validation_every_nth") == 10
    with pytest.raises(click.UsageError, match="--validation-every-nth is an option of --strategy "
                                               "adc or fast, and this run trains mcmc"):
        configured("--preset", "fast", "--strategy", "mcmc", "--validation-every-nth", "0")
    old = make_config("fast", "adc")
    old.strategy_config.validation_every_nth = 0
    ResumeCheck(config_flags={flag: 0}).check(old, {}, {})
    with pytest.raises(UserError, match="--validation-every-nth 10 disagrees with the run being "
                                        r"resumed \(0\)"):
        ResumeCheck(config_flags={flag: 10}).check(old, {}, {})
    with pytest.raises(UserError, match="is an option of --strategy adc or fast, and the run "
                                        "being resumed trains mcmc"):
        ResumeCheck(config_flags={flag: 0}).check(make_config("fast", "mcmc"), {}, {})


def test_the_preset_help_says_the_steps_each_strategy_trains():
    """The help is computed from the presets: the steps of each preset under its own strategy and
    where another strategy's differ (not the old 'fast: 7k steps', wrong under --preset fast)."""
    from wgsl_splat.app.config_cli import preset_help
    from wgsl_splat.training.config import make_config

    preset = next(p for p in main.commands["train"].params if p.name == "preset")
    text = " ".join(preset.help.split())
    assert text == " ".join(preset_help().split())
    assert ("fast: the fast mode, 5000 steps of fast (--strategy adc or mcmc: 7000)" in text)
    assert "smoke: quick checks with the whole schedule compressed, 300 steps of adc" in text
    assert "default: the original schedule, 30000 steps of adc" in text
    for name in ("smoke", "fast", "default"):
        for strategy in ("adc", "mcmc", "fast"):
            assert str(make_config(name, strategy).iters) in text, (name, strategy)
