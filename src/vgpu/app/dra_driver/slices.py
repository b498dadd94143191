"""Publishes the node's ResourceSlice: one pool named after the node, one device per healthy
GPU, written only when it differs from what the API has.

Each round lists the slices of this driver and node, compares the one named for the node with
the slice wanted (generation aside; quantities compared as numbers, so the API server's
spelling of `80Gi` changes nothing), and when they differ writes the wanted one with the
pool's generation one above the highest seen, so the scheduler drops the old devices at once.
Other slices of this driver and node (an older naming, a second pool) are deleted. A slice the
API server would refuse (`slice_problems`) is not written: an error names every rule it breaks.
Rounds run when the GPUs change and every `resync_s` (someone may have edited or deleted it).

An API server without consumable capacity (feature gate `DRAConsumableCapacity` off, the
default before Kubernetes 1.36) stores the slice without `allowMultipleAllocations` and the
request policies. The slice it answered with is then taken as what this slice looks like there
(logged once as a warning: each GPU then goes to one claim whole), so it is not written again
and again.
"""

import logging
import threading
from dataclasses import replace
from typing import Any

from vgpu.app.dra_driver.gpus import DraGpus
from vgpu.domain.dra import (
    DraError,
    ResourceSlice,
    node_slice,
    parse_resource_slice,
    resource_slice_json,
    slice_problems,
)
from vgpu.ports.cluster import ClusterError
from vgpu.ports.dra import DraApiPort

log = logging.getLogger(__name__)


class SlicePublisher:
    """`writes` counts the creates, replaces and deletes sent; `refused` the rounds whose slice
    broke an API rule."""

    def __init__(
        self,
        api: DraApiPort,
        gpus: DraGpus,
        driver: str,
        resync_s: float = 60.0,
        retry_s: float = 5.0,
    ) -> None:
        self._api = api
        self._gpus = gpus
        self._driver = driver
        self._node = gpus.node
        self._resync = resync_s
        self._retry = retry_s
        self._generation = 0  # the highest pool generation seen or written
        # (wanted, as the API stored it), both without generation, when the two differ
        self._stored_as: tuple[ResourceSlice, ResourceSlice] | None = None
        self.writes = 0
        self.refused = 0

    def publish(self) -> bool:
        """One round; True when the API has the wanted slice afterwards. ClusterError when the
        API cannot be read or written."""
        wanted = node_slice(self._node, self._gpus.devices(), self._driver)
        existing = self._api.list_slices(self._driver, self._node)
        mine = next((s for s in existing if _name(s) == wanted.name), None)
        for other in existing:
            if other is not mine:
                log.info("deleting ResourceSlice %s: not this driver's slice name", _name(other))
                self._api.delete_slice(_name(other))
                self.writes += 1
        self._generation = max(self._generation, *(_generation(s) for s in existing), 0)
        current = _read(mine)
        if current is not None and self._unchanged(current, wanted):
            return True
        generation = self._generation + 1
        wanted = replace(wanted, pool=replace(wanted.pool, generation=generation))
        problems = slice_problems(wanted)
        if problems:
            self.refused += 1
            log.error(
                "not publishing ResourceSlice %s: the API server would refuse it: %s",
                wanted.name,
                "; ".join(problems),
            )
            return False
        body = resource_slice_json(wanted)
        if mine is None:
            stored = self._api.create_slice(body)
        else:
            body["metadata"]["resourceVersion"] = (mine.get("metadata") or {}).get(
                "resourceVersion"
            )
            stored = self._api.replace_slice(body)
        self.writes += 1
        self._generation = generation
        self._note_stored(wanted, _read(stored))
        names = ", ".join(d.name for d in wanted.devices) or "no devices"
        log.info(
            "published ResourceSlice %s (pool %s, generation %d): %s",
            wanted.name,
            self._node,
            generation,
            names,
        )
        return True

    def _unchanged(self, current: ResourceSlice, wanted: ResourceSlice) -> bool:
        if _same(current, wanted):
            return True
        return self._stored_as == (_unnumbered(wanted), _unnumbered(current))

    def _note_stored(self, wanted: ResourceSlice, stored: ResourceSlice | None) -> None:
        if stored is None or _same(stored, wanted):
            self._stored_as = None
            return
        pair = (_unnumbered(wanted), _unnumbered(stored))
        if self._stored_as is None:
            log.warning(
                "the API server stored ResourceSlice %s without some of its fields (%s): "
                "consumable capacity (feature gate DRAConsumableCapacity) is off in the API "
                "server, so each GPU goes to one claim whole",
                wanted.name,
                _dropped(wanted, stored),
            )
        self._stored_as = pair

    def run(self, stop: threading.Event) -> None:
        """Publish now, then on every GPU change and every `resync_s`, until `stop`."""
        seen = -1
        while not stop.is_set():
            seen = self._gpus.generation
            try:
                self.publish()
            except ClusterError as exc:
                log.warning("publishing the ResourceSlice failed (%s); retrying in %.0f s",
                            exc, self._retry)
                stop.wait(self._retry)
                continue
            except Exception:  # keep publishing: one bad round must not end the loop
                log.exception("publishing the ResourceSlice failed; retrying in %.0f s",
                              self._retry)
                stop.wait(self._retry)
                continue
            self._gpus.changed_since(seen, self._resync, stop.is_set)


def _name(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def _generation(manifest: dict[str, Any]) -> int:
    spec = manifest.get("spec")
    pool = spec.get("pool") if isinstance(spec, dict) else None
    value = pool.get("generation") if isinstance(pool, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _read(manifest: dict[str, Any] | None) -> ResourceSlice | None:
    if manifest is None:
        return None
    try:
        return parse_resource_slice(manifest)
    except DraError as exc:
        log.warning("the published ResourceSlice does not read (%s): replacing it", exc)
        return None


def _same(current: ResourceSlice, wanted: ResourceSlice) -> bool:
    return _unnumbered(current) == _unnumbered(wanted)


def _unnumbered(slice_: ResourceSlice) -> ResourceSlice:
    return replace(slice_, pool=replace(slice_.pool, generation=0))


def _dropped(wanted: ResourceSlice, stored: ResourceSlice) -> str:
    """What the API server left out of the devices, for the log."""
    found = set()
    for sent, kept in zip(wanted.devices, stored.devices, strict=False):
        if sent.allow_multiple_allocations and not kept.allow_multiple_allocations:
            found.add("allowMultipleAllocations")
        for name, capacity in sent.capacity.items():
            if capacity.policy is not None and (
                name not in kept.capacity or kept.capacity[name].policy is None
            ):
                found.add("requestPolicy")
    return ", ".join(sorted(found)) or "device fields"
