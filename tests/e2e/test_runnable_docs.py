"""Every shell example in README.md and docs/*.md marked runnable is run, and its output must be
what the page shows.

A runnable example is a ```console block right after a `<!-- runnable -->` line. In it, a line
starting with `$ ` is a command (continued on the next line after a trailing `\\` or inside
an open single quote); the lines up to the next command are what it prints, stdout and stderr together. Two placeholders stand for
what varies from run to run: `<...>` within a line matches any text, and a line that is only
`...` matches any number of lines. A command ending in `&` runs in the background until the
block ends. The block runs in the repository's root as one bash script, with this checkout's
`vgpu` first on PATH and, where the kernel allows it, in a network namespace of its own, so
that the default ports of a server it starts are never taken by something else on the machine.
"""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = "<!-- runnable -->"
SEPARATOR = "@@vgpu-docs-command@@"


@dataclass(frozen=True)
class Command:
    text: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    commands: tuple[Command, ...]

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def examples(page: Path) -> list[Example]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for number, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[number + 1].strip() if number + 1 < len(lines) else ""
        assert fence == "```console", f"{page}:{number + 1}: {MARKER} must precede ```console"
        end = lines.index("```", number + 2)
        found.append(Example(page, number + 1, tuple(parse(lines[number + 2 : end]))))
    return found


def parse(block: list[str]) -> list[Command]:
    commands: list[Command] = []
    text: list[str] = []
    output: list[str] = []
    for line in block:
        if text and continues("\n".join(text)):
            text.append(line)
        elif line.startswith("$ "):
            if text:
                commands.append(Command("\n".join(text), tuple(output)))
            text, output = [line[2:]], []
        else:
            assert text, f"output before the first command: {line!r}"
            output.append(line)
    commands.append(Command("\n".join(text), tuple(output)))
    return commands


def continues(command: str) -> bool:
    """Whether the command goes on on the next line: a trailing `\\` or an open `'...'`."""
    return command.endswith("\\") or command.count("'") % 2 == 1


ALL = [example for page in PAGES for example in examples(page)]


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """`expected` against `actual` line by line, with the two placeholders."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(part) for part in head.rstrip().split("<...>"))
    return re.fullmatch(pattern, actual[0].rstrip()) is not None and matches(rest, actual[1:])


@cache
def isolation() -> list[str]:
    """`unshare` into a user and network namespace with loopback up, where the kernel lets us."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        return []
    wrapper = [unshare, "--user", "--map-root-user", "--net"]
    probe = subprocess.run([*wrapper, ip, "link", "set", "lo", "up"], capture_output=True)
    return wrapper if probe.returncode == 0 else []


def run(example: Example, home: Path) -> list[list[str]]:
    """Each command's output lines, in order."""
    script = ["set -u", "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT"]
    if isolation():
        script.append("ip link set lo up")
    for command in example.commands:
        script += [f"echo {SEPARATOR}", command.text]
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "COLUMNS": "100",
    }
    done = subprocess.run(
        [*isolation(), "bash", "-c", "\n".join(script)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    chunks = done.stdout.split(f"{SEPARATOR}\n")[1:]
    return [chunk.rstrip("\n").splitlines() for chunk in chunks]


def test_runnable_examples_are_found_on_the_pages_a_newcomer_reads_first() -> None:
    pages = {example.page.name for example in ALL}
    assert {"README.md", "scheduler.md", "explain.md", "simulate.md"} <= pages


@pytest.mark.parametrize("example", ALL, ids=[example.name for example in ALL])
def test_the_example_prints_what_the_page_shows(example: Example, tmp_path: Path) -> None:
    outputs = run(example, tmp_path)

    assert len(outputs) == len(example.commands), f"the block stopped early: {outputs}"
    for command, actual in zip(example.commands, outputs, strict=True):
        shown = "\n".join(actual)
        assert matches(command.expected, actual), f"$ {command.text}\nprinted:\n{shown}"


def test_the_placeholders_match_what_varies_and_nothing_else() -> None:
    assert matches(("took <...> s",), ["took 1.4 s"])
    assert matches(("a", "...", "z"), ["a", "b", "c", "z"])
    assert matches(("a", "...", "z"), ["a", "z"])
    assert not matches(("took <...> s",), ["took 1.4 ms"])
    assert not matches(("a", "z"), ["a", "b", "z"])
    assert not matches(("a",), ["a", "b"])
