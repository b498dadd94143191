"""NodePrepareResources and NodeUnprepareResources: from an allocated claim to the CDI spec
the container runtime applies, and back.

Preparing a claim:

1. read it from the API (never a cache) and check it is the claim the kubelet named (same
   uid), allocated, to this node, with devices of this driver on healthy GPUs it publishes
   (`claim_shares`);
2. already prepared: answer what was answered before (the spec is written again if it went
   missing) - Prepare is idempotent, across restarts too;
3. refuse a claim that shares a container with another claim of this driver (HAMi-core reads
   one set of limits per container);
4. under one lock with every other Prepare and Unprepare: check the node's ledger (prepared
   claims and the device plugin's running pods), make the shares' directories and
   `claim.json`, write the CDI spec atomically, record the claim durably; only then answer.
   A failure on the way undoes what this Prepare wrote.

Every claim gets its own outcome: a claim that cannot be prepared gets an error naming why, and
never fails the others. Unpreparing removes the spec, the directories and the record entry
(in that order, so a crash leaves the claim counted, never the reverse); an unknown claim is
unprepared already.
"""

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from vgpu.app.dra_driver.gpus import DraGpus
from vgpu.app.dra_driver.ledger import DraNodeLedger
from vgpu.app.dra_driver.prepared import PreparedClaims, RecordCorrupt
from vgpu.domain.dra import (
    ClaimRefused,
    DeviceShare,
    DraError,
    HamiCoreSetup,
    PreparedClaim,
    PreparedRecordError,
    ResourceClaim,
    claim_shares,
    claim_spec,
    claims_beside,
    decode_claim_info,
    encode_claim_info,
    over_capacity,
    parse_resource_claim,
)
from vgpu.ports.cluster import ClusterError
from vgpu.ports.dra import (
    CdiCatalogPort,
    CdiSpecPort,
    ClaimDirsPort,
    ClaimOutcome,
    ClaimRef,
    DraApiPort,
    HostFileError,
    PreparedDevice,
)

log = logging.getLogger(__name__)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GpuVisibility:
    """How a claim's GPUs are made visible: NVIDIA's CDI devices (`cdi`), the NVIDIA container
    runtime's variable (`env`), or the first where NVIDIA's static spec allows (`auto`)."""

    def __init__(self, catalog: CdiCatalogPort, mode: str, kind: str) -> None:
        self._catalog = catalog
        self._mode = mode
        self._kind = kind

    def nvidia_ids(
        self, claim: str, shares: Sequence[DeviceShare], cards: dict[str, int]
    ) -> dict[str, str]:
        """NVIDIA's CDI id by uuid, by the GPU's uuid or its index (`cards`: uuid to index);
        empty to use the variable. ClaimRefused in `cdi` mode when one is missing."""
        if self._mode == "env":
            return {}
        names = self._catalog.device_names(self._kind)
        found = {}
        for uuid in {s.uuid for s in shares}:
            name = uuid if uuid in names else str(cards[uuid])
            if name in names:
                found[uuid] = f"{self._kind}={name}"
            elif self._mode == "cdi":
                raise ClaimRefused(
                    f"claim {claim}: no {self._kind} CDI device for GPU {uuid} in the static CDI "
                    "specs (is NVIDIA's spec generated, nvidia-ctk cdi generate?); "
                    "gpu_visibility is cdi"
                )
        return found


class ClaimPreparer:
    """Thread-safe. `api`, `specs`, `dirs`, `prepared` and `ledger` as their ports say."""

    def __init__(
        self,
        api: DraApiPort,
        gpus: DraGpus,
        ledger: DraNodeLedger,
        prepared: PreparedClaims,
        specs: CdiSpecPort,
        dirs: ClaimDirsPort,
        visibility: GpuVisibility,
        setup: HamiCoreSetup,
        driver: str,
        clock: Callable[[], str] = utc_now,
    ) -> None:
        self._api = api
        self._gpus = gpus
        self._ledger = ledger
        self._prepared = prepared
        self._specs = specs
        self._dirs = dirs
        self._visibility = visibility
        self._setup = setup
        self._driver = driver
        self._node = gpus.node
        self._clock = clock
        self._lock = threading.Lock()

    # the kubelet's calls ---------------------------------------------------------------------
    def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, ClaimOutcome]:
        return {ref.uid: self._outcome(ref) for ref in claims}

    def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        errors = {}
        for ref in claims:
            try:
                self.release(ref.uid, f"claim {ref.key}")
                errors[ref.uid] = ""
            except HostFileError as exc:
                log.error("claim %s (uid %s) not unprepared: %s", ref.key, ref.uid, exc)
                errors[ref.uid] = f"claim {ref.key}: {exc}"
        return errors

    def release(self, uid: str, what: str) -> None:
        """Unprepare one claim by uid: spec, directories, then the record; HostFileError."""
        with self._lock:
            self._specs.remove(uid)
            self._dirs.remove(uid)
            gone = self._prepared.remove(uid)
        if gone is not None:
            log.info("unprepared %s (uid %s): its GPU shares are free", what, uid)

    # the start -------------------------------------------------------------------------------
    def restore(self) -> None:
        """After a (re)start: write again the specs and directories of recorded claims the node
        lost, and remove the specs and directories of claims not recorded (a Prepare that
        crashed before its answer; the kubelet asks again). A record that does not read, or
        is gone while claims' files are on the host, is first rebuilt from those files.
        HostFileError when the record cannot be read, or cannot be rebuilt."""
        with self._lock:
            try:
                recorded = self._prepared.entries()
            except RecordCorrupt as exc:
                recorded = self._rebuild(str(exc))
            else:
                if self._prepared.missing and (self._dirs.claim_uids() or self._specs.claim_uids()):
                    recorded = self._rebuild(
                        f"prepared-claims record {self._prepared.location} is missing"
                    )
            for uid, claim in recorded.items():
                if claim.spec and self._specs.read(uid) != claim.spec:
                    self._specs.write(uid, claim.spec)
                    log.info("wrote the CDI spec of prepared claim %s again", claim.key)
                self._make_dirs(claim)
            for uid in set(self._specs.claim_uids()) - set(recorded):
                log.info("removing CDI spec of claim uid %s: not a prepared claim", uid)
                self._specs.remove(uid)
            for uid in set(self._dirs.claim_uids()) - set(recorded):
                log.info("removing claim directories of uid %s: not a prepared claim", uid)
                self._dirs.remove(uid)

    def _rebuild(self, why: str) -> dict[str, PreparedClaim]:
        """The record read back from every claim's `claim.json` and CDI spec on the host, saved;
        HostFileError (and nothing changed) when one of them cannot be read back, since a
        claim left out would stop counting on its GPU."""
        log.error("%s: rebuilding it from the prepared claims' own files", why)
        index = {card.uuid: card.index for card in self._gpus.cards().values()}
        claims, unread = [], []
        for uid in sorted(set(self._dirs.claim_uids()) | set(self._specs.claim_uids())):
            try:
                text = self._dirs.read_info(uid)
                if text is None:
                    raise PreparedRecordError("claim.json: missing")
                claim = decode_claim_info(uid, text, self._specs.read(uid) or {})
            except (PreparedRecordError, HostFileError) as exc:
                unread.append(f"claim uid {uid}: {exc}")
                continue
            if not claim.spec:
                claim = replace(claim, spec=self._spec_again(claim, index))
            claims.append(claim)
            log.warning("prepared claim %s (uid %s) read back from its own files", claim.key, uid)
        if unread:
            raise HostFileError(
                f"{why}, and rebuilding it from the prepared claims' own files failed "
                f"({'; '.join(unread)}): nothing is prepared, as claims prepared before could "
                f"not all be counted. Once those claims' pods have ended, remove their "
                "directories and specs, or the record, and restart the driver"
            )
        self._prepared.rebuild(claims)
        return {claim.uid: claim for claim in claims}

    def _spec_again(self, claim: PreparedClaim, index: dict[str, int]) -> dict[str, object]:
        """The CDI spec of a claim whose spec file was lost with the record, made again from
        its shares ({} when one of its GPUs is gone from the node: nothing to write)."""
        if any(s.uuid not in index for s in claim.shares):
            return {}
        dirs = {s.dir_name: self._dirs.path(claim.uid, s.dir_name) for s in claim.shares}
        nvidia = {
            s.uuid: ids[1] for s, ids in zip(claim.shares, claim.cdi_ids, strict=True) if ids[1:]
        }
        return claim_spec(claim.uid, claim.shares, self._setup, dirs, nvidia, index).spec

    # one claim -------------------------------------------------------------------------------
    def _outcome(self, ref: ClaimRef) -> ClaimOutcome:
        try:
            prepared = self._prepare(ref)
        except (ClaimRefused, DraError, ClusterError, HostFileError) as exc:
            log.warning("claim %s (uid %s) not prepared: %s", ref.key, ref.uid, exc)
            return ClaimOutcome(error=str(exc))
        except Exception as exc:  # an edge: one claim's surprise must not fail the others
            log.exception("preparing claim %s failed unexpectedly", ref.key)
            return ClaimOutcome(error=f"claim {ref.key}: internal error: {exc}")
        return ClaimOutcome(devices=_devices(prepared))

    def _prepare(self, ref: ClaimRef) -> PreparedClaim:
        claim = self._read(ref)
        cards = self._gpus.cards()
        shares = claim_shares(claim, self._driver, self._node, cards)
        with self._lock:
            known = self._prepared_before(claim.uid, shares)
        if known is not None:
            return known
        for share in shares:
            problem = self._gpus.problem(share.device)
            if problem:
                raise ClaimRefused(f"claim {claim.key}: {problem}")
        self._refuse_shared_containers(claim)
        by_uuid = {card.uuid: card for card in cards.values()}
        indexes = {card.uuid: card.index for card in cards.values()}
        nvidia = self._visibility.nvidia_ids(claim.key, shares, indexes)
        with self._lock:
            # a call for the same claim may have prepared it while this one was checking
            known = self._prepared_before(claim.uid, shares)
            if known is not None:
                return known
            problem = over_capacity(
                claim.key, shares, by_uuid, self._ledger.holders(excluding_uid=claim.uid)
            )
            if problem:
                raise ClaimRefused(problem)
            fresh = self._prepared.get(claim.uid) is None
            return self._write(claim, shares, nvidia, indexes, fresh=fresh)

    def _prepared_before(
        self, uid: str, shares: tuple[DeviceShare, ...]
    ) -> PreparedClaim | None:
        """The claim as prepared before with these shares, its spec written again if it went
        missing; None when it was not. Under the lock."""
        known = self._prepared.get(uid)
        if known is None or known.shares != shares:
            return None
        if known.spec and self._specs.read(uid) != known.spec:
            self._specs.write(uid, known.spec)
        return known

    def _read(self, ref: ClaimRef) -> ResourceClaim:
        manifest = self._api.get_claim(ref.namespace, ref.name)
        if manifest is None:
            raise ClaimRefused(f"claim {ref.key} does not exist (deleted?)")
        claim = parse_resource_claim(manifest)
        if claim.uid != ref.uid:
            raise ClaimRefused(
                f"claim {ref.key} has uid {claim.uid}, not {ref.uid}: it was deleted and made "
                "again"
            )
        return claim

    def _refuse_shared_containers(self, claim: ResourceClaim) -> None:
        for consumer in claim.reserved_for:
            if consumer.resource != "pods" or consumer.api_group:
                continue
            pod = self._api.get_pod(claim.namespace, consumer.name)
            if pod is None or (pod.get("metadata") or {}).get("uid") != consumer.uid:
                continue
            for container, others in claims_beside(pod, claim.name).items():
                ours = [name for name in others if self._has_our_devices(claim.namespace, name)]
                if ours:
                    raise ClaimRefused(
                        f"claim {claim.key}: container {container} of pod {consumer.name} also "
                        f"uses claim {ours[0]} with GPUs of {self._driver}; HAMi-core reads one "
                        "set of limits per container, so the two claims' limits would overwrite "
                        "each other: ask for every GPU of the container in one claim"
                    )

    def _has_our_devices(self, namespace: str, name: str) -> bool:
        manifest = self._api.get_claim(namespace, name)
        if manifest is None:
            return False
        try:
            other = parse_resource_claim(manifest)
        except DraError:
            return False  # that claim is refused on its own when it is prepared
        allocation = other.allocation
        return allocation is not None and any(
            r.driver == self._driver and r.pool == self._node for r in allocation.results
        )

    def _write(
        self,
        claim: ResourceClaim,
        shares: tuple[DeviceShare, ...],
        nvidia: dict[str, str],
        indexes: dict[str, int],
        *,
        fresh: bool,
    ) -> PreparedClaim:
        dirs = {s.dir_name: self._dirs.path(claim.uid, s.dir_name) for s in shares if not s.admin}
        made = claim_spec(claim.uid, shares, self._setup, dirs, nvidia, indexes)
        prepared = PreparedClaim(
            claim.uid,
            claim.namespace,
            claim.name,
            shares,
            made.cdi_ids,
            made.spec,
            self._clock(),
            claim.reserved_for,
        )
        try:
            self._make_dirs(prepared)
            path = self._specs.write(claim.uid, made.spec)
            self._prepared.add(prepared)
        except HostFileError:
            if fresh:  # leave nothing of a claim that was not prepared
                self._undo(claim.uid)
            raise
        log.info(
            "prepared claim %s (uid %s): %s; CDI spec %s",
            claim.key,
            claim.uid,
            ", ".join(_describe(s) for s in shares),
            path,
        )
        return prepared

    def _make_dirs(self, claim: PreparedClaim) -> None:
        shares = [share.dir_name for share in claim.shares if not share.admin]
        self._dirs.prepare(claim.uid, shares, encode_claim_info(claim, self._driver))

    def _undo(self, uid: str) -> None:
        for remove in (self._specs.remove, self._dirs.remove):
            try:
                remove(uid)
            except HostFileError as exc:
                log.error("cleaning up after a failed Prepare of claim uid %s: %s", uid, exc)


def _devices(claim: PreparedClaim) -> tuple[PreparedDevice, ...]:
    return tuple(
        PreparedDevice((s.request_name,), s.pool, s.device, ids, s.share_id)
        for s, ids in zip(claim.shares, claim.cdi_ids, strict=True)
    )


def _describe(share: DeviceShare) -> str:
    if share.admin:
        return f"{share.device} ({share.uuid}) with admin access, no limits"
    return f"{share.device} ({share.uuid}) {share.limit_mib} MiB, {share.cores}% cores"
