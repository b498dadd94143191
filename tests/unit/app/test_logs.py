"""`vgpu --version`, and `--log-level` / `--log-json` on every command."""

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version

import pytest

from vgpu.app import logs
from vgpu.app.cli import COMMANDS, main


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_version_prints_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.strip() == f"vgpu {version('vgpu')}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_the_log_flags(command: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vgpu.app.cli", command, "--help"],
        capture_output=True, text=True, check=True,
    )
    assert "--log-level" in result.stdout and "--log-json" in result.stdout


def test_a_bad_log_level_is_a_usage_error_naming_the_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["simulate", "--log-level", "LOUD"])
    assert caught.value.code == 2
    assert "--log-level: invalid choice: 'LOUD'" in capsys.readouterr().err


def test_json_logs_are_one_object_per_line_with_level_logger_and_message() -> None:
    out = io.StringIO()
    logs.configure("DEBUG", True, out)
    log = logging.getLogger("vgpu.test")
    log.debug("placed %s on %s", "pod-1", "gpu-1")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert {k: first[k] for k in ("level", "logger", "message")} == {
        "level": "DEBUG", "logger": "vgpu.test", "message": "placed pod-1 on gpu-1"
    }
    assert first["time"].endswith("+00:00")
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exception"]


def test_the_level_flag_filters_and_a_command_s_own_basic_config_keeps_it() -> None:
    out = io.StringIO()
    logs.configure("WARNING", False, out)
    logging.basicConfig(level="DEBUG")  # what a sub-command does after parsing its settings
    logging.getLogger("vgpu.test").info("hidden")
    logging.getLogger("vgpu.test").warning("shown")
    assert out.getvalue().count("\n") == 1 and "WARNING vgpu.test: shown" in out.getvalue()
