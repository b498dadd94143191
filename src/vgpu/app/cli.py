"""The `vgpu` command. Each sub-command lives in its own module with a `register` function."""

import argparse
import importlib
import sys
from collections.abc import Sequence

# sub-command name -> module with `register(subparsers) -> None`; each sets `run` on its parser
COMMANDS = {
    "simulate": "vgpu.app.simulate.cli",
    "scheduler": "vgpu.app.scheduler.cli",
    "device-plugin": "vgpu.app.device_plugin.cli",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes (HAMi-compatible): scheduler extender, "
        "device plugin and simulator.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).register(subparsers)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
