"""A pretend NVIDIA driver: the pynvml functions the adapter calls, patched with pytest-mock.

The real pynvml module and its real error classes are used; only the functions that would call
into libnvidia-ml.so.1 are replaced. Each card object doubles as its NVML device handle.
"""

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from pytest_mock import MockerFixture

from vgpu.adapters.nvml import NvmlGpus, XidFilter
from vgpu.adapters.nvml.library import load_pynvml

pynvml = load_pynvml()

V100_UUID = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
A100_UUID = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GIB = 1024**3


@dataclass(eq=False)
class Card:
    uuid: str | bytes
    name: str | bytes
    total_bytes: int
    bus_id: str | bytes = "00000000:3B:00.0"
    mig: Any = (0, 0)  # (current, pending) or an exception to raise
    supported_events: Any = None  # int mask or an exception; None means all three kinds
    register_error: Exception | None = None
    # enabled NVLinks: (remote bus id, remote device type); None: the GPU has no NVLink
    nvlinks: list[tuple[str, int]] | None = None
    # NVML profile constant -> info (id, sliceCount, instanceCount, multiprocessorCount,
    # memorySizeMB, and `placements` as (start, size) pairs)
    mig_profiles: dict[int, Any] = field(default_factory=dict)


@dataclass
class Driver:
    """The patched module plus the cards it reports."""

    nvml: ModuleType
    cards: list[Card]
    mocks: dict[str, Any] = field(default_factory=dict)
    # (card index, card index) -> NVML topology level; unlisted pairs are NVML_TOPOLOGY_SYSTEM
    ancestors: dict[tuple[int, int], Any] = field(default_factory=dict)

    def event(self, card: Card, xid: int, kind: int | None = None) -> SimpleNamespace:
        """The struct nvmlEventSetWait returns for an XID (or another kind of) event."""
        event_type = pynvml.nvmlEventTypeXidCriticalError if kind is None else kind
        return SimpleNamespace(eventType=event_type, eventData=xid, device=card)

    def events(self, *results: Any) -> None:
        """What successive nvmlEventSetWait calls return (structs) or raise (errors)."""
        self.mocks["nvmlEventSetWait"].side_effect = list(results)


def _raise_or(value: Any) -> Any:
    if isinstance(value, BaseException):
        raise value
    return value


def install(mocker: MockerFixture) -> Driver:
    """Patch pynvml so that it reports a V100 and an A100."""
    cards = [
        Card(V100_UUID, "Tesla V100-PCIE-32GB", 32 * GIB, bus_id="00000000:3B:00.0"),
        Card(A100_UUID, "NVIDIA A100-SXM4-80GB", 80 * GIB, bus_id="00000000:AF:00.0"),
    ]
    all_events = (
        pynvml.nvmlEventTypeXidCriticalError
        | pynvml.nvmlEventTypeSingleBitEccError
        | pynvml.nvmlEventTypeDoubleBitEccError
    )

    def supported(card: Card) -> int:
        return int(
            _raise_or(all_events if card.supported_events is None else card.supported_events)
        )

    def register(card: Card, mask: int, event_set: Any) -> None:
        if card.register_error is not None:
            raise card.register_error

    ancestors: dict[tuple[int, int], Any] = {}

    def ancestor(a: Card, b: Card) -> int:
        i, j = sorted((cards.index(a), cards.index(b)))
        return int(_raise_or(ancestors.get((i, j), pynvml.NVML_TOPOLOGY_SYSTEM)))

    def link_state(card: Card, link: int) -> int:
        if card.nvlinks is None:
            raise pynvml.NVMLError_NotSupported()
        if link >= len(card.nvlinks):
            raise pynvml.NVMLError_InvalidArgument()
        return int(pynvml.NVML_FEATURE_ENABLED)

    def profile_info(card: Card, profile: int) -> Any:
        if profile not in card.mig_profiles:
            raise pynvml.NVMLError_NotSupported()
        return card.mig_profiles[profile]

    behaviour: dict[str, Any] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlDeviceGetCount": lambda: len(cards),
        "nvmlDeviceGetHandleByIndex": lambda i: cards[i],
        "nvmlDeviceGetUUID": lambda card: _raise_or(card.uuid),
        "nvmlDeviceGetName": lambda card: card.name,
        "nvmlDeviceGetMemoryInfo": lambda card: SimpleNamespace(
            total=card.total_bytes, free=card.total_bytes, used=0
        ),
        "nvmlDeviceGetPciInfo": lambda card: SimpleNamespace(busId=card.bus_id),
        "nvmlDeviceGetMigMode": lambda card: _raise_or(card.mig),
        "nvmlEventSetCreate": lambda: "event-set",
        "nvmlDeviceGetSupportedEventTypes": supported,
        "nvmlDeviceRegisterEvents": register,
        "nvmlEventSetWait": None,
        "nvmlEventSetFree": lambda event_set: None,
        "nvmlDeviceGetTopologyCommonAncestor": ancestor,
        "nvmlDeviceGetNvLinkState": link_state,
        "nvmlDeviceGetNvLinkRemotePciInfo": lambda card, link: SimpleNamespace(
            busId=card.nvlinks[link][0]
        ),
        "nvmlDeviceGetNvLinkRemoteDeviceType": lambda card, link: card.nvlinks[link][1],
        "nvmlDeviceGetGpuInstanceProfileInfo": profile_info,
        "nvmlDeviceGetGpuInstancePossiblePlacements": lambda card, profile_id: [
            SimpleNamespace(start=start, size=size)
            for info in card.mig_profiles.values()
            if info.id == profile_id
            for start, size in info.placements
        ],
    }
    mocks = {
        name: mocker.patch.object(
            pynvml,
            name,
            side_effect=fn if fn is not None else pynvml.NVMLError_Timeout(),
        )
        for name, fn in behaviour.items()
    }
    return Driver(pynvml, cards, mocks, ancestors)


def numa(root: Path, bus: str, value: str) -> None:
    folder = root / "bus" / "pci" / "devices" / bus
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "numa_node").write_text(value)


def gpus(sysfs_root: Path | None = None, xids: XidFilter | None = None) -> NvmlGpus:
    return NvmlGpus(xids=xids or XidFilter(), sysfs_root=sysfs_root or Path("/nonexistent"))
