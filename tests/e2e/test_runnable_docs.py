"""Every shell example in README.md and docs/*.md marked runnable is run, and its output must be
what the page shows.

A runnable example is a ```console block right after a `<!-- runnable -->` line. In it, a line
starting with `$ ` is a command (continued on the next line after a trailing `\\` or inside
an open single quote); the lines up to the next command are what it prints, stdout and stderr together. Two placeholders stand for
what varies from run to run: `<...>` within a line matches any text, and a line that is only
`...` matches any number of lines. A command ending in `&` runs in the background until the
block ends.

The block runs as a reader types it in a new shell after the README's install: one bash
script at the root of the checkout, with no virtual environment on PATH, so a command must
name `.venv/bin/vgpu` as the page does. The root is a copy made of links to the checkout's
files and folders, with `.venv` the environment running these tests (the README's `.venv`
when run as the README says). Where the kernel allows it the script runs in a network
namespace of its own, so that the default ports of a server it starts are never taken by
something else on the machine.
"""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
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


def reader_checkout(home: Path) -> Path:
    """The checkout as the README's reader has it: every top-level entry linked, and `.venv`
    the environment these tests run in."""
    root = home / "checkout"
    root.mkdir(parents=True)
    for entry in REPO.iterdir():
        if entry.name != ".venv":
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(Path(sys.prefix))
    assert (root / ".venv" / "bin" / "vgpu").exists(), (
        f"no vgpu command in {sys.prefix}: run the tests as the README installs them"
    )
    return root


def reader_path() -> str:
    """PATH without any virtual environment's bin, as in a new shell."""
    folders = os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    venv_bins = {str(Path(sys.prefix) / "bin"), str(Path(sys.executable).parent)}
    return os.pathsep.join(f for f in folders if f not in venv_bins and "/.venv/" not in f + "/")


def run(example: Example, home: Path) -> list[list[str]]:
    """Each command's output lines, in order."""
    script = ["set -u", "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT"]
    if isolation():
        script.append("ip link set lo up")
    for command in example.commands:
        script += [f"echo {SEPARATOR}", command.text]
    env = {
        "PATH": reader_path(),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "COLUMNS": "100",
    }
    done = subprocess.run(
        [*isolation(), "bash", "-c", "\n".join(script)],
        cwd=reader_checkout(home),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=180,  # generous: a loaded machine starts the processes slowly
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


def test_a_block_runs_as_in_a_new_shell_where_bare_vgpu_is_not_found(tmp_path: Path) -> None:
    bare = Example(REPO / "README.md", 0, (Command("vgpu --version; echo $?", ()),))
    named = Example(REPO / "README.md", 0, (Command(".venv/bin/vgpu --version", ()),))

    [printed] = run(bare, tmp_path / "bare")
    assert printed[-1] == "127"  # bash: command not found
    [printed] = run(named, tmp_path / "named")
    assert printed == [f"vgpu {version('vgpu')}"]


def test_the_placeholders_match_what_varies_and_nothing_else() -> None:
    assert matches(("took <...> s",), ["took 1.4 s"])
    assert matches(("a", "...", "z"), ["a", "b", "c", "z"])
    assert matches(("a", "...", "z"), ["a", "z"])
    assert not matches(("took <...> s",), ["took 1.4 ms"])
    assert not matches(("a", "z"), ["a", "b", "z"])
    assert not matches(("a",), ["a", "b"])
