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
