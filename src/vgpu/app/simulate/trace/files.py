"""Trace files: the openb node and pod lists shipped with vgpu, or any CSV (plain or gzip)
with the same columns. A bad row is reported with its file, line, column and value."""

import csv
import gzip
import io
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, TypeVar

from vgpu.domain.fragmentation import MILLI, MilliNode, MilliPod

WORKLOADS = ("default", "gpushare100", "gpuspec33", "multigpu50")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")  # gpu_spec: optional
MAX_CARDS = 64  # per node or pod
_SHOWN = 10  # problems listed before "and N more"

Source = Path | Traversable
T = TypeVar("T")


class TraceError(ValueError):
    """A trace file that cannot be read or has bad rows; the message lists what and where."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    name: str
    node: MilliNode  # as it starts: everything free


@dataclass(frozen=True, slots=True)
class TracePod:
    name: str
    pod: MilliPod


def shipped_nodes() -> Traversable:
    """The 1213 GPU nodes of the openb trace."""
    return _openb("openb_node_list_gpu_node.csv.gz")


def shipped_pods(workload: str) -> Traversable:
    """One of the shipped openb pod lists, by its name in `WORKLOADS`."""
    if workload not in WORKLOADS:
        raise TraceError(f"no shipped trace {workload!r} (shipped: {', '.join(WORKLOADS)})")
    return _openb(f"openb_pod_list_{workload}.csv.gz")


def read_nodes(source: Source) -> tuple[TraceNode, ...]:
    """Nodes from a CSV with the columns `sn, cpu_milli, memory_mib, gpu, model`; every card
    starts free."""
    nodes = _read(source, NODE_COLUMNS, _node)
    seen: set[str] = set()
    for trace_node in nodes:
        if trace_node.name in seen:
            raise TraceError(f"{source.name}: sn: node {trace_node.name!r} is listed twice")
        seen.add(trace_node.name)
    if not nodes:
        raise TraceError(f"{source.name}: no nodes")
    return nodes


def read_pods(source: Source) -> tuple[TracePod, ...]:
    """Pods from a CSV with the columns `name, cpu_milli, memory_mib, num_gpu, gpu_milli` and
    optionally `gpu_spec` (`A|B`: only cards of model A or B); other columns are ignored."""
    pods = _read(source, POD_COLUMNS, _pod)
    if not pods:
        raise TraceError(f"{source.name}: no pods")
    return pods


def _openb(name: str) -> Traversable:
    return resources.files(__package__) / "openb" / name


def _read(
    source: Source, columns: tuple[str, ...], row: Callable[[dict[str, str]], T]
) -> tuple[T, ...]:
    problems: list[str] = []
    rows: list[T] = []
    try:
        with _text(source) as text:
            reader = csv.DictReader(text)
            missing = [c for c in columns if c not in (reader.fieldnames or ())]
            if missing:
                raise TraceError(f"{source.name}: missing column(s): {', '.join(missing)}")
            for line, values in enumerate(reader, start=2):
                try:
                    rows.append(row(values))
                except _RowError as exc:
                    problems.append(f"{source.name} line {line}: {exc}")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{source.name}: cannot be read: {exc}") from None
    if problems:
        more = len(problems) - _SHOWN
        shown = problems[:_SHOWN] + ([f"and {more} more"] if more > 0 else [])
        raise TraceError("\n".join(shown))
    return tuple(rows)


def _text(source: Source) -> IO[str]:
    raw = source.open("rb")
    stream = gzip.GzipFile(fileobj=raw) if source.name.endswith(".gz") else raw
    return io.TextIOWrapper(stream, encoding="utf-8", newline="")


class _RowError(ValueError):
    pass


def _node(values: dict[str, str]) -> TraceNode:
    name = _text_field(values, "sn")
    cards = _whole(values, "gpu", MAX_CARDS)
    model = (values.get("model") or "").strip()
    if cards and not model:
        raise _RowError("model: a node with GPUs needs its card model")
    free = (MILLI,) * cards
    return TraceNode(
        name, MilliNode(model, _whole(values, "cpu_milli"), _whole(values, "memory_mib"), free)
    )


def _pod(values: dict[str, str]) -> TracePod:
    name = _text_field(values, "name")
    gpus = _whole(values, "num_gpu", MAX_CARDS)
    milli = _whole(values, "gpu_milli", MILLI)
    if gpus == 0 and milli:
        raise _RowError(f"gpu_milli: {milli} with num_gpu 0 (a pod without GPUs has no share)")
    if gpus and not milli:
        raise _RowError("gpu_milli: 0 for a GPU pod (it must be 1..1000)")
    if gpus > 1 and milli < MILLI:
        raise _RowError(
            f"gpu_milli: {milli} with num_gpu {gpus} (a pod with several GPUs takes them whole, "
            "1000 each)"
        )
    return TracePod(
        name,
        MilliPod(
            _whole(values, "cpu_milli"),
            _whole(values, "memory_mib"),
            gpus,
            milli,
            _models(values.get("gpu_spec") or ""),
        ),
    )


def _text_field(values: dict[str, str], column: str) -> str:
    text = (values.get(column) or "").strip()
    if not text:
        raise _RowError(f"{column}: empty")
    return text


def _whole(values: dict[str, str], column: str, most: int | None = None) -> int:
    raw = (values.get(column) or "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise _RowError(f"{column}: {raw!r} is not a whole number") from None
    if value < 0 or (most is not None and value > most):
        bounds = f"0..{most}" if most is not None else "at least 0"
        raise _RowError(f"{column}: {value} is out of range ({bounds})")
    return value


def _models(spec: str) -> frozenset[str]:
    if not spec.strip():
        return frozenset()
    models = [m.strip() for m in spec.split("|")]
    if not all(models):
        raise _RowError(f"gpu_spec: {spec!r} has an empty model name (expected A|B)")
    return frozenset(models)
