"""docs/embedding.md's complete example runs as it is and prints what the page shows."""

import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).parents[3] / "docs" / "embedding.md"


def blocks(language: str) -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def example() -> tuple[str, str]:
    """The page's one Python program and the output it shows for it."""
    [program] = blocks("python")
    [printed] = blocks("text")
    return program, printed


def test_the_guide_s_example_prints_what_the_page_shows() -> None:
    program, printed = example()

    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
