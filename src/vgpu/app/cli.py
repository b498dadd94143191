"""The `vgpu` command. Each sub-command lives in its own module with a `register` function.

Only the module of the command being run is imported, so one command's heavy or broken
imports (FastAPI, gRPC, matplotlib) never slow down or break another.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module with `register(subparsers)` that sets `run` on its parser, one-line summary)
COMMANDS = {
    "simulate": (
        "vgpu.app.simulate.cli",
        "run a day of GPU workload on a simulated cluster and compare scheduling policies",
    ),
    "scheduler": (
        "vgpu.app.scheduler.cli",
        "serve the admission webhook and the kube-scheduler extender",
    ),
    "device-plugin": (
        "vgpu.app.device_plugin.cli",
        "run the per-node device plugin (kubelet gRPC + node registration)",
    ),
    "monitor": ("vgpu.app.monitor.cli", "serve per-container GPU usage from HAMi-core's regions"),
    "explain": ("vgpu.app.explain.cli", "say why a GPU pod is Pending and what would make it fit"),
}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes (HAMi-compatible): scheduler extender, "
        "device plugin and simulator.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = words[0] if words and words[0] in COMMANDS else None
    for name, (module, summary) in COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    args = parser.parse_args(words)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
