"""What a node's device plugin served, from its record file (`<state_dir>/served.json`), for the
invariant checker: a tenant can erase or edit the annotations of a pod it runs, but the cards
the plugin handed that pod stay taken until it ends.

`with_served(holdings(pods)[0], served_holdings(file, pods))` is the checker's list of holdings
with each pod the record names counted by what was served instead of what its annotations say
now. Pods the API shows finished or being deleted are left out, as `holdings` leaves them out.
"""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.e2e.faults.invariants import Holding
from vgpu.domain.trust import decode_served_record


def served_holdings(record_file: Path, pods: Iterable[Mapping[str, Any]]) -> list[Holding]:
    """The record's grants of pods still running, as holdings on the record's node; none when
    the plugin has not written a record (yet). A damaged record raises ServedRecordError."""
    if not record_file.exists():
        return []
    node, grants = decode_served_record(record_file.read_text())
    running = {_uid(p) for p in pods if _running(p)}
    return [Holding(g.pod, node, g.footprint()) for g in grants if g.pod_uid in running]


def with_served(api: Iterable[Holding], served: Iterable[Holding]) -> list[Holding]:
    """`api`'s holdings, each pod in `served` counted by its served grant instead."""
    by_pod = {h.pod: h for h in api}
    by_pod.update({h.pod: h for h in served})
    return list(by_pod.values())


def _uid(manifest: Mapping[str, Any]) -> str:
    return str((manifest.get("metadata") or {}).get("uid", ""))


def _running(manifest: Mapping[str, Any]) -> bool:
    meta = manifest.get("metadata") or {}
    phase = (manifest.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")
