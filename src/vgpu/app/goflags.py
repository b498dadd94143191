"""HAMi's Go-style flags on every `vgpu` command, so a HAMi values file's `extraArgs` keep working.

HAMi's processes take klog's verbosity (`-v=4`, `--v=4`, `-v 4`) and the scheduler's
`--debug`. They mean a log level here: a verbosity of 4 or more (klog's "debug" level and
above) or `--debug` is DEBUG, a lower verbosity INFO. They share `--log-level`'s destination,
so whichever comes last on the command line wins. HAMi v2.4's device plugin took `-v` as its
version switch, and HAMi v2.4's chart passes `-v=false`: that changes nothing. HAMi's other
flags have no meaning in vgpu and are refused by name (`refuse_unknown`), never silently
dropped.
"""

import argparse
from collections.abc import Sequence
from typing import Any

DEBUG_VERBOSITY = 4  # klog: V(4) is debug-level verbosity


def verbosity_level(text: str) -> str | None:
    """The log level of a klog verbosity (`4` -> DEBUG), None for `false` (HAMi v2.4's version
    switch, off); ArgumentTypeError if neither."""
    if text == "false":
        return None
    try:
        verbosity = int(text)
    except ValueError:
        verbosity = -1
    if verbosity < 0:
        raise argparse.ArgumentTypeError(
            f"invalid verbosity {text!r}: a klog level, a whole number 0 or more"
        )
    return "DEBUG" if verbosity >= DEBUG_VERBOSITY else "INFO"


class _Verbosity(argparse.Action):
    """Stores the level `verbosity_level` gives, and nothing for `-v=false`."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if values is not None:
            setattr(namespace, self.dest, values)


def add_go_flags(parser: argparse.ArgumentParser) -> None:
    """`-v`/`--v` and `--debug`, writing the same `log_level` as `--log-level`."""
    parser.add_argument(
        "-v",
        "--v",
        dest="log_level",
        type=verbosity_level,
        action=_Verbosity,
        metavar="N",
        help="HAMi's klog verbosity: 4 or more logs at DEBUG, less at INFO",
    )
    parser.add_argument(
        "--debug",
        dest="log_level",
        action="store_const",
        const="DEBUG",
        help="HAMi's debug switch: log at DEBUG",
    )


def refuse_unknown(parser: argparse.ArgumentParser, extras: Sequence[str]) -> None:
    """Exit 2 naming the first argument `parser` does not take (argparse's usage error)."""
    if not extras:
        return
    word = extras[0]
    flag = word.split("=", 1)[0]
    if flag.startswith("-"):
        parser.error(
            f"unknown flag {flag} (in {word!r}): of HAMi's Go-style flags vgpu takes only "
            "-v=N, --v=N and --debug; see --help for this command's flags"
        )
    parser.error(f"unexpected argument {word!r}")
