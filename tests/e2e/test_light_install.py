"""The light install: `pip install vgpu` (no extra) brings the domain and the simulator, without
the Kubernetes client, gRPC, the web stack or the crypto library, which come with
`vgpu[cluster]`; a command that needs them says so instead of failing on an import.

The test installs vgpu, as a wheel built from this checkout, into a fresh virtual environment
with pip and no package index: the packages of the light form are put there first, copied from
this test's own environment, so pip resolves vgpu's requirements against them alone, and an
install that needed anything more would fail. Building and installing take a few seconds.
"""

import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.unit.domain.test_embedding_guide import example

REPO = Path(__file__).parents[2]
# the heavy packages: the Kubernetes client, gRPC, the web stack, the crypto library
HEAVY = {"kubernetes", "grpcio", "protobuf", "fastapi", "starlette", "uvicorn", "cryptography"}


def light_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(spec) for spec in project["dependencies"]]


def closure(requirements: list[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions these requirements need, transitively, without extras."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found[name] = importlib.metadata.distribution(name)
        todo += [Requirement(spec) for spec in found[name].requires or ()]
    return found


def copy_installed(dist: importlib.metadata.Distribution, site: Path) -> None:
    """The distribution's files (its code and dist-info, not its scripts) into `site`."""
    root = Path(str(dist.locate_file("")))
    for file in dist.files or ():
        if file.parts[0] == ".." or "__pycache__" in file.parts:
            continue
        target = site / file
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / file, target)


def build_wheel(into: Path) -> Path:
    """vgpu's wheel, built from a copy of the checkout's sources (the checkout stays clean)."""
    source = into / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    pip(sys.executable, "wheel", "--no-deps", "--no-build-isolation", "-w", str(into), str(source))
    [wheel] = into.glob("vgpu-*.whl")
    return wheel


def pip(python: str, *words: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "--isolated",
            "--no-input",
            *words,
            "--quiet",
            "--no-index",
        ],
        check=True,
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def light_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with vgpu installed as `pip install vgpu` installs it."""
    home = tmp_path_factory.mktemp("light")
    wheel = build_wheel(home)
    env = home / "venv"
    venv.create(env, with_pip=False)
    [site] = (env / "lib").glob("python3.*/site-packages")
    for dist in closure(light_requirements()).values():
        copy_installed(dist, site)
    pip(str(env / "bin" / "python"), "install", str(wheel))
    return env


def run(env: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env / "bin" / words[0]), *words[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        cwd=env,
    )


def installed(env: Path) -> set[str]:
    listing = run(
        env,
        "python",
        "-c",
        "import importlib.metadata as m\n"
        "print('\\n'.join(d.metadata['Name'] for d in m.distributions()))",
    )
    return {canonicalize_name(name) for name in listing.stdout.split()}


def test_the_light_install_holds_none_of_the_cluster_packages(light_env: Path) -> None:
    packages = installed(light_env)

    assert "vgpu" in packages
    assert packages & HEAVY == set()
    assert {"pydantic", "pyyaml"} <= packages


def test_the_simulator_runs_in_the_light_install(light_env: Path) -> None:
    done = run(light_env, "vgpu", "simulate", "--no-progress", "--policy", "binpack/spread")

    assert done.returncode == 0, done.stderr
    assert "binpack/spread" in done.stdout and "placed" in done.stdout


def test_the_embedding_guide_s_example_runs_in_the_light_install(light_env: Path) -> None:
    program, printed = example()

    done = run(light_env, "python", "-c", program)

    assert done.returncode == 0, done.stderr
    assert done.stdout == printed


@pytest.mark.parametrize("command", ["scheduler", "device-plugin", "monitor", "explain"])
def test_a_cluster_command_says_which_extra_to_install(light_env: Path, command: str) -> None:
    done = run(light_env, "vgpu", command, "--help")

    assert done.returncode == 2
    assert f"vgpu {command}: needs the packages of vgpu's cluster extra" in done.stderr
    assert "pip install 'vgpu[cluster]'" in done.stderr
    assert "Traceback" not in done.stderr
