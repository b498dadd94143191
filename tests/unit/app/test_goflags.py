"""HAMi's Go-style flags (`-v=N`, `--v=N`, `--debug`) on every command: a log level, the last
level flag winning; HAMi's other flags refused by name with argparse's exit 2."""

import pytest

from vgpu.app.cli import COMMANDS, parse


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("flags", "level"),
    [
        (["-v=4"], "DEBUG"),
        (["--v=5"], "DEBUG"),
        (["-v", "4"], "DEBUG"),
        (["--debug"], "DEBUG"),
        (["-v=2"], "INFO"),
        (["--v=0"], "INFO"),
    ],
)
def test_hami_verbosity_and_debug_set_the_log_level(
    command: str, flags: list[str], level: str
) -> None:
    assert parse([command, *flags]).log_level == level


@pytest.mark.parametrize(
    ("flags", "level"),
    [
        (["--log-level=WARNING", "-v=4"], "DEBUG"),  # a HAMi extraArgs after the chart's level
        (["-v=4", "--log-level=ERROR"], "ERROR"),
        (["--debug", "-v=1"], "INFO"),
        (["--log-level=WARNING", "-v=false"], "WARNING"),  # HAMi v2.4's device plugin args
    ],
)
def test_the_last_level_flag_wins(flags: list[str], level: str) -> None:
    assert parse(["device-plugin", *flags]).log_level == level


@pytest.mark.parametrize("command", ["scheduler", "monitor"])
@pytest.mark.parametrize(
    ("words", "named"),
    [
        (["--profiling"], "unknown flag --profiling"),
        (["--policy-config-file=/config/config.json"], "unknown flag --policy-config-file"),
        (["--logtostderr", "true"], "unknown flag --logtostderr"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)
def test_other_hami_flags_are_refused_by_the_command_naming_the_flag(
    command: str, words: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse([command, "-v=4", *words])
    assert caught.value.code == 2
    assert f"vgpu {command}: error: {named}" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "-1", "4.5"])
def test_a_verbosity_that_is_no_klog_level_is_refused_naming_flag_and_value(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        parse(["scheduler", f"-v={value}"])
    assert caught.value.code == 2
    assert f"argument -v/--v: invalid verbosity '{value}'" in capsys.readouterr().err
