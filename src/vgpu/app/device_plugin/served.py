"""The plugin's memory of what it served: pod uid to the grant it handed out, kept on the host.

An entry is saved before the Allocate answer leaves (no record, no answer), and dropped only
once the pod has ended, as a successful read of the node's pods shows (finished, or gone).
Whatever the pod's annotations say later, its served grant stays counted.

Reading the record at start:

- no file: nothing was served yet;
- a file that does not read (damaged, edited): it is moved aside (`served.json.corrupt-<time>`,
  kept for a person to look at), an error is logged, and the plugin starts from an empty
  record: what it served before is still counted from the kubelet's checkpoint, which lists
  every container that holds devices with the answer it was given;
- a file that cannot be read at all (permissions, I/O): nothing is served (RecordError) until
  it reads, since saving a new record then would overwrite what the old one holds.
"""

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from vgpu.domain.device import Usage
from vgpu.domain.mig import MigRuntime, with_runtimes
from vgpu.domain.pod import Pod
from vgpu.domain.trust import GrantClaim, ServedGrant, signed_mig_text
from vgpu.ports.served import RecordCorrupt, ServedRecordPort

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Served:
    """One recorded grant with what it holds per card, decoded once."""

    grant: ServedGrant
    footprint: dict[str, Usage]


class GrantChanged(Exception):
    """A pod already served names another grant now."""


def _same_grant(served: ServedGrant, claim: GrantClaim) -> bool:
    """Whether `claim` names the cards and MIG reservations `served` was served under (the
    instances' runtime identity, added after serving, aside)."""
    return served.allocated == claim.allocated and (
        signed_mig_text(served.mig_reservations) == claim.mig_reservations
    )


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ServedRecord:
    """Thread-safe: the Allocate path adds, the keeper's loop prunes."""

    def __init__(
        self, store: ServedRecordPort, node: str, clock: Callable[[], str] = utc_now
    ) -> None:
        self._store = store
        self._node = node
        self._clock = clock
        self._lock = threading.Lock()
        self._served: dict[str, Served] | None = None  # None: not read yet
        self._adds = 0  # pods added since start
        self._added: dict[str, int] = {}  # uid -> `_adds` when it was added

    @property
    def location(self) -> str:
        return self._store.location

    def entries(self) -> dict[str, Served]:
        """By pod uid, every grant served and not yet known to have ended; RecordError while
        the record cannot be read."""
        with self._lock:
            return dict(self._loaded())

    def add(
        self,
        pod: Pod,
        claim: GrantClaim,
        signed: bool,
        runtimes: Mapping[tuple[int, int], MigRuntime],
    ) -> bool:
        """Record `pod`'s grant (the claim it was served under) and the MIG instances served
        it so far (`runtimes`, by container and device: a restarted plugin takes them up even
        if a tenant edits the pod's own copy), and save the record before returning; True when
        the pod was new. RecordError when it cannot be saved: then nothing may be served;
        GrantChanged when the pod was served another grant before (a tenant rewrote an
        unsigned grant between its containers' calls): the record keeps only the first."""
        with self._lock:
            served = self._loaded()
            known = served.get(pod.uid)
            if known is not None and not _same_grant(known.grant, claim):
                raise GrantChanged(
                    f"pod {pod.key} was first served {known.grant.allocated!r} and now names "
                    f"{claim.allocated!r}: a grant does not change once served"
                )
            if known is None:
                self._added[pod.uid] = self._adds = self._adds + 1
                grant = ServedGrant(
                    pod.uid,
                    pod.key,
                    claim.allocated,
                    with_runtimes(claim.mig_reservations, runtimes),
                    pod.init_count,
                    signed,
                    self._clock(),
                )
            else:
                mig = with_runtimes(known.grant.mig_reservations, runtimes)
                if mig == known.grant.mig_reservations:
                    return False
                grant = replace(known.grant, mig_reservations=mig)
            updated = {**served, pod.uid: Served(grant, grant.footprint())}
            self._save(updated)
            self._served = updated
        if known is not None:
            log.info("served record %s: pod %s's MIG instances noted", self.location, pod.key)
            return False
        log.info(
            "served record %s: pod %s (uid %s) holds %s until it ends",
            self._store.location,
            pod.key,
            pod.uid,
            grant.allocated,
        )
        return True

    def mark(self) -> int:
        """Where the record stands now, for a `prune` by a pod list read after this call."""
        with self._lock:
            return self._adds

    def prune(self, live_uids: Collection[str], listed_after: int) -> list[ServedGrant]:
        """Drop the pods whose uid is not in `live_uids` (read from the cluster after `mark`
        gave `listed_after`: not finished, still there) and save; the grants dropped. A pod
        added since that mark stays, since the list may predate it. RecordError when it cannot
        be saved (the entries are then kept, to be dropped next time)."""
        with self._lock:
            served = self._loaded()
            added = self._added

            def ended(uid: str) -> bool:
                return uid not in live_uids and added.get(uid, 0) <= listed_after

            gone = [s.grant for uid, s in served.items() if ended(uid)]
            if not gone:
                return []
            kept = {uid: s for uid, s in served.items() if not ended(uid)}
            self._save(kept)
            self._served = kept
            for grant in gone:
                added.pop(grant.pod_uid, None)
        for grant in gone:
            log.info(
                "pod %s (uid %s) has ended: its grant %s is no longer counted on node %s",
                grant.pod,
                grant.pod_uid,
                grant.allocated,
                self._node,
            )
        return gone

    def _loaded(self) -> dict[str, Served]:
        if self._served is None:
            self._served = self._read()
        return self._served

    def _read(self) -> dict[str, Served]:
        try:
            grants = self._store.load()
        except RecordCorrupt as exc:
            aside = self._store.set_aside()
            log.error(
                "%s; moved it to %s and starting from an empty record: the pods it served "
                "are counted from the kubelet's device checkpoint instead",
                exc,
                aside,
            )
            return {}
        log.info(
            "served record %s: %d pod(s) served before this start are counted until they end",
            self._store.location,
            len(grants),
        )
        return {g.pod_uid: Served(g, g.footprint()) for g in grants}

    def _save(self, served: dict[str, Served]) -> None:
        self._store.save(self._node, [s.grant for s in served.values()])
