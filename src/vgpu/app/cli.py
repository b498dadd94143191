"""The `vgpu` command. Each sub-command lives in its own module with a `register` function.

Only the module of the command being run is imported, so one command's heavy or broken
imports (FastAPI, gRPC, matplotlib) never slow down or break another, and a light install
(`pip install vgpu`: the domain and the simulator) runs `vgpu simulate` without the packages
of the cluster processes, which come with `vgpu[cluster]`. `--log-level`, `--log-json` and
HAMi's Go-style `-v=N` / `--debug` (vgpu.app.goflags) are added to every sub-command here;
`--version` belongs to `vgpu` itself.
"""

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from vgpu.app import goflags, logs

# name -> (module with `register(subparsers)` that sets `run` on its parser, one-line summary)
# Every command but `simulate` needs the packages of the `cluster` extra.
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


LIGHT_COMMANDS = frozenset({"simulate"})
"""The commands a light install (`pip install vgpu`, without the `cluster` extra) runs."""


def missing_extra(command: str, exc: ModuleNotFoundError) -> str | None:
    """What to say when `exc` is a package of the `cluster` extra missing from a light
    install; None when it is anything else (a missing vgpu module is a bug, shown as it is)."""
    top = (exc.name or "").partition(".")[0]
    if command in LIGHT_COMMANDS or not top or top == "vgpu":
        return None
    return (
        f"vgpu {command}: needs the packages of vgpu's cluster extra, and {top!r} is not "
        "installed: pip install 'vgpu[cluster]' (in a checkout: pip install -e '.[cluster]')"
    )


def build_parser(
    chosen: str | None,
) -> tuple[argparse.ArgumentParser, "argparse._SubParsersAction[argparse.ArgumentParser]"]:
    """`vgpu`'s parser with every command listed and only `chosen`'s module imported."""
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes (HAMi-compatible): scheduler extender, "
        "device plugin and simulator.",
        epilog="`vgpu COMMAND --help` explains a command's flags. `pip install vgpu` runs "
        "simulate; the other commands need the cluster extra: pip install 'vgpu[cluster]'.",
    )
    parser.add_argument("--version", action="version", version=f"vgpu {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        if name == chosen:
            importlib.import_module(module).register(subparsers)
            add_log_flags(subparsers.choices[name])
        else:
            subparsers.add_parser(name, help=summary)
    return parser, subparsers


def parse(words: Sequence[str]) -> argparse.Namespace:
    """`vgpu`'s command line parsed; SystemExit(2) with argparse's message on a bad one.

    An argument the chosen command does not take is reported by that command's parser
    (`vgpu scheduler: error: unknown flag --profiling ...`), naming the flag."""
    words = list(words)
    parser, subparsers = build_parser(words[0] if words and words[0] in COMMANDS else None)
    args, extras = parser.parse_known_args(words)
    goflags.refuse_unknown(subparsers.choices[args.command], extras)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if not words:  # bare `vgpu`: what it can do, not an error
        build_parser(None)[0].print_help()
        return 0
    try:
        args = parse(words)
        level = getattr(args, "log_level", None)
        if level or args.log_json:
            logs.configure(level, args.log_json)
        code: int = args.run(args)
    except ModuleNotFoundError as exc:
        message = missing_extra(words[0], exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
