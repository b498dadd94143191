import subprocess
import sys

import pytest

from vgpu.app.cli import COMMANDS, main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["schedule"])
    assert caught.value.code == 2
    assert "invalid choice: 'schedule'" in capsys.readouterr().err


def test_a_command_imports_only_its_own_module() -> None:
    code = (
        "import sys\n"
        "from vgpu.app.cli import main\n"
        "try:\n    main(['simulate', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('vgpu.app.') and m.endswith('.cli')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "['vgpu.app.cli', 'vgpu.app.simulate.cli']"


def test_bare_vgpu_prints_the_help_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: vgpu")
    assert all(name in captured.out for name in COMMANDS)
    assert "pip install 'vgpu[cluster]'" in " ".join(captured.out.split())
    assert captured.err == ""


# what a light install (`pip install vgpu`, no extra) lacks, made unimportable in a subprocess
WITHOUT_CLUSTER_PACKAGES = (
    "import sys\n"
    "for name in ('kubernetes', 'grpc', 'google', 'fastapi', 'starlette', 'uvicorn',\n"
    "             'cryptography', 'dependency_injector', 'prometheus_client', 'pynvml', 'orjson'):\n"
    "    sys.modules[name] = None\n"
    "from vgpu.app.cli import main\n"
)


@pytest.mark.parametrize("command", ["scheduler", "device-plugin", "monitor", "explain"])
def test_a_command_of_the_cluster_extra_says_how_to_install_it(command: str) -> None:
    code = WITHOUT_CLUSTER_PACKAGES + f"sys.exit(main([{command!r}, '--help']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

    assert done.returncode == 2
    assert done.stderr.startswith(f"vgpu {command}: needs the packages of vgpu's cluster extra")
    assert "is not installed: pip install 'vgpu[cluster]'" in done.stderr


def test_simulate_needs_none_of_the_cluster_packages() -> None:
    code = WITHOUT_CLUSTER_PACKAGES + (
        "sys.exit(main(['simulate', '--no-progress', '--policy', 'binpack/spread', '--json']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

    assert done.returncode == 0, done.stderr
    assert '"policy": "binpack/spread"' in done.stdout


def test_a_missing_vgpu_module_is_a_bug_shown_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(COMMANDS, "explain", ("vgpu.app.no_such_module", "gone"))
    with pytest.raises(ModuleNotFoundError, match=r"vgpu\.app\.no_such_module"):
        main(["explain"])
