"""The `vgpu` command. Each sub-command lives in its own module with a `register` function.

Only the module of the command being run is imported, so one command's heavy or broken
imports (FastAPI, gRPC, matplotlib) never slow down or break another. `--log-level`,
`--log-json` and HAMi's Go-style `-v=N` / `--debug` (vgpu.app.goflags) are added to every
sub-command here; `--version` belongs to `vgpu` itself.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from vgpu.app import goflags, logs

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
    "dra-driver": (
        "vgpu.app.dra_driver.cli",
        "run the per-node kubelet DRA plugin (ResourceSlices + CDI specs with HAMi-core)",
    ),
    "monitor": ("vgpu.app.monitor.cli", "serve per-container GPU usage from HAMi-core's regions"),
    "explain": ("vgpu.app.explain.cli", "say why a GPU pod is Pending and what would make it fit"),
}


def package_version() -> str:
    try:
        return version("vgpu")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    """`--log-level` (unless the command has its own), `--log-json`, and HAMi's `-v`/`--debug`."""
    if "--log-level" not in parser._option_string_actions:
        parser.add_argument(
            "--log-level",
            type=str.upper,
            choices=logs.LEVELS,
            help="least severe messages to log (default INFO, or the command's setting)",
        )
    parser.add_argument(
        "--log-json", action="store_true", help="log one JSON object per line instead of text"
    )
    goflags.add_go_flags(parser)


def parse(words: Sequence[str]) -> argparse.Namespace:
    """`vgpu`'s command line parsed; SystemExit(2) with argparse's message on a bad one.

    An argument the chosen command does not take is reported by that command's parser
    (`vgpu scheduler: error: unknown flag --profiling ...`), naming the flag."""
    words = list(words)
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes (HAMi-compatible): scheduler extender, "
        "device plugin and simulator.",
    )
    parser.add_argument("--version", action="version", version=f"vgpu {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = words[0] if words and words[0] in COMMANDS else None
    for name, (module, summary) in COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(subparsers)
            add_log_flags(subparsers.choices[name])
        else:
            subparsers.add_parser(name, help=summary)
    args, extras = parser.parse_known_args(words)
    goflags.refuse_unknown(subparsers.choices[args.command], extras)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    level = getattr(args, "log_level", None)
    if level or args.log_json:
        logs.configure(level, args.log_json)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
