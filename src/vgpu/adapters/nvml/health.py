"""GPU health from NVML events, with the rules of NVIDIA's device plugin (and HAMi's copy).

Every GPU is registered for XID critical-error events (and single/double-bit ECC events where
the GPU supports them) in one NVML event set. Then:

- a GPU that cannot be registered (its supported event types cannot be read, or the driver
  refuses the registration, e.g. a GPU too old for events) is reported unhealthy at once;
- an XID event marks its GPU unhealthy unless the XidFilter ignores that XID;
- other events (ECC) are logged and skipped: a double-bit ECC error also raises an XID;
- an event whose GPU cannot be named marks every GPU unhealthy, since the bad one is unknown;
- three failed waits in a row (anything but a timeout) mark every GPU unhealthy;
- if the event set itself cannot be created, health checking is off (logged), as NVIDIA's
  plugin continues without health checks.

A GPU is reported unhealthy once; like the reference, it does not recover without a restart.
"""

import logging
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from vgpu.adapters.nvml.library import text
from vgpu.adapters.nvml.xids import XidFilter
from vgpu.domain.inventory import HealthEvent

log = logging.getLogger(__name__)

MAX_SUCCESSIVE_WAIT_ERRORS = 3


class XidWatcher:
    """One NVML event set over the node's GPUs; `wait` turns its events into health changes.

    The caller keeps NVML initialised while the watcher is in use. `close` may be called from
    another thread: it waits for a running `wait` to return before freeing the event set.
    """

    def __init__(self, nvml: ModuleType, xids: XidFilter) -> None:
        self._nvml = nvml
        self._xids = xids
        self._event_set: Any = None
        self._handles: dict[str, Any] = {}
        self._reported: set[str] = set()
        self._pending: list[HealthEvent] = []
        self._wait_errors = 0
        self._wait_lock = threading.Lock()
        self._closed = threading.Event()
        self.active = False

    def start(self, handles: Mapping[str, Any]) -> None:
        """Create the event set and register every GPU (uuid -> NVML handle)."""
        nvml = self._nvml
        self._handles = dict(handles)
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as err:
            log.error(
                "GPU health checks are off: NVML could not create an event set (%s: %s)",
                type(err).__name__,
                err,
            )
            return
        wanted = (
            nvml.nvmlEventTypeXidCriticalError
            | nvml.nvmlEventTypeSingleBitEccError
            | nvml.nvmlEventTypeDoubleBitEccError
        )
        for uuid, handle in self._handles.items():
            try:
                supported = nvml.nvmlDeviceGetSupportedEventTypes(handle)
            except nvml.NVMLError as err:
                self._pending += self._unhealthy(uuid, f"NVML cannot list its events ({err})")
                continue
            try:
                nvml.nvmlDeviceRegisterEvents(handle, wanted & supported, self._event_set)
            except nvml.NVMLError_NotSupported:
                reason = "too old for NVML health events (registration not supported)"
                self._pending += self._unhealthy(uuid, reason)
            except nvml.NVMLError as err:
                reason = f"NVML refused to register its health events ({err})"
                self._pending += self._unhealthy(uuid, reason)
        self.active = True
        log.info("watching %d GPU(s) for XID errors; %s", len(self._handles), self._xids.describe())

    def wait(self, timeout_s: float) -> list[HealthEvent]:
        """Health changes seen within `timeout_s`; blocks the whole time on persistent errors."""
        if self._pending:
            pending, self._pending = self._pending, []
            return pending
        if not self.active:
            self._closed.wait(max(timeout_s, 0.0))
            return []
        nvml = self._nvml
        with self._wait_lock:
            if self._closed.is_set():
                return []
            try:
                data = nvml.nvmlEventSetWait(self._event_set, _millis(timeout_s))
            except nvml.NVMLError_Timeout:
                self._wait_errors = 0
                return []
            except nvml.NVMLError as err:
                failed = err
            else:
                self._wait_errors = 0
                return self._on_event(data)
        return self._on_wait_error(failed, timeout_s)

    def close(self) -> None:
        """Free the event set; later waits return nothing at once."""
        self._closed.set()
        with self._wait_lock:
            event_set, self._event_set = self._event_set, None
            self.active = False
        if event_set is None:
            return
        try:
            self._nvml.nvmlEventSetFree(event_set)
        except self._nvml.NVMLError as err:
            log.warning("NVML could not free the event set (%s); ignoring", err)

    def _on_event(self, data: Any) -> list[HealthEvent]:
        nvml = self._nvml
        if data.eventType != nvml.nvmlEventTypeXidCriticalError:
            log.info("skipping NVML event of type 0x%x (not an XID error)", data.eventType)
            return []
        xid = int(data.eventData)
        if not self._xids.is_critical(xid):
            log.info("skipping XID %d: an application error, the GPU stays healthy", xid)
            return []
        try:
            uuid = text(nvml.nvmlDeviceGetUUID(data.device))
        except nvml.NVMLError as err:
            log.error("XID %d on a GPU NVML cannot name (%s); all GPUs are suspect", xid, err)
            return self._all_unhealthy(f"XID {xid} on an unidentified GPU")
        if uuid not in self._handles:
            log.info("ignoring XID %d on GPU %s, which this node does not register", xid, uuid)
            return []
        return self._unhealthy(uuid, f"XID {xid} critical error")

    def _on_wait_error(self, err: Exception, timeout_s: float) -> list[HealthEvent]:
        self._wait_errors += 1
        log.warning(
            "waiting for NVML events failed (%s: %s), %d time(s) in a row",
            type(err).__name__,
            err,
            self._wait_errors,
        )
        if self._wait_errors >= MAX_SUCCESSIVE_WAIT_ERRORS:
            return self._all_unhealthy(f"NVML event wait keeps failing ({err})")
        # A failing wait returns at once; pausing keeps the caller's loop from spinning.
        self._closed.wait(max(timeout_s, 0.0))
        return []

    def _all_unhealthy(self, reason: str) -> list[HealthEvent]:
        events: list[HealthEvent] = []
        for uuid in self._handles:
            events.extend(self._unhealthy(uuid, reason))
        return events

    def _unhealthy(self, uuid: str, reason: str) -> list[HealthEvent]:
        if uuid in self._reported:
            return []
        self._reported.add(uuid)
        log.warning("GPU %s is unhealthy: %s", uuid, reason)
        return [HealthEvent(uuid=uuid, healthy=False, reason=reason)]


def _millis(timeout_s: float) -> int:
    return max(int(timeout_s * 1000), 0)
