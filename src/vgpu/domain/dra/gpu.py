"""How vgpu publishes a GPU to DRA, and how it reads back what a claim got of one.

One device per GPU, named `gpu-<index>`, in one pool per node named after the node, shared
(`allowMultipleAllocations`) by claims that each consume part of two capacities:

- `memory`, in bytes: value = the card's memory; a request is rounded up to a whole MiB (at
  least 1 MiB); a claim that does not ask consumes the whole card's memory;
- `cores`, in percent of the card's SMs: value = 100 (times the node's core scaling); a
  request is a whole percent from 0 (no limit on compute, as HAMi's `gpucores: 0`); a claim
  that does not ask consumes them all.

These are the policies of HAMi's DRA driver, so the claims its users write allocate the same.
Attributes: `uuid`, `index`, `productName`, `type` (HAMi's vendor name, `NVIDIA`),
`numaNode`, and when known `architecture` and `driverVersion`.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.domain.device import Device as Card
from vgpu.domain.dra.model import (
    AttributeValue,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceRequestAllocationResult,
    RequestPolicy,
    ResourcePool,
    ResourceSlice,
    ValidRange,
    Version,
)
from vgpu.domain.dra.reader import Field

DEFAULT_DRIVER = "gpu.vgpu.io"
"""The DRA driver name vgpu publishes its GPUs under unless configured otherwise."""
EXTENDED_RESOURCE = "nvidia.com/gpu"
"""The extended resource the GPU DeviceClass answers: a pod asking for it gets a claim."""
MEMORY = "memory"
"""The capacity of a GPU device in bytes of memory."""
CORES = "cores"
"""The capacity of a GPU device in percent of its SMs (100 x core scaling for a whole card)."""
MIB = 2**20


@dataclass(frozen=True, slots=True)
class GpuCard:
    """What vgpu publishes about one GPU: `memory_mib` after memory scaling, `cores` 100
    times the core scaling; `architecture` and `driver_version` are left out when empty."""

    uuid: str
    index: int
    product_name: str
    memory_mib: int
    cores: int = 100
    numa_node: int = 0
    type: str = "NVIDIA"
    architecture: str = ""
    driver_version: str = ""


@dataclass(frozen=True, slots=True)
class GpuShare:
    """What one allocated device result gives a container: bytes of memory, percent of
    cores (0: no limit on compute)."""

    memory_bytes: int
    cores: int


def gpu_device_name(index: int) -> str:
    """The device name of the GPU with this index: `gpu-0`."""
    return f"gpu-{index}"


def gpu_device(card: GpuCard) -> Device:
    """The DRA device for one GPU (the same function builds the driver's slice and the
    simulator's)."""
    memory = card.memory_mib * MIB
    attributes: dict[str, AttributeValue] = {
        "uuid": card.uuid,
        "index": card.index,
        "productName": card.product_name,
        "type": card.type,
        "numaNode": card.numa_node,
    }
    if card.architecture:
        attributes["architecture"] = card.architecture
    if card.driver_version:
        attributes["driverVersion"] = driver_version(card.driver_version)
    return Device(
        name=gpu_device_name(card.index),
        attributes=attributes,
        capacity={
            MEMORY: DeviceCapacity(
                memory, RequestPolicy(default=memory, valid_range=ValidRange(MIB, memory, MIB))
            ),
            CORES: DeviceCapacity(
                card.cores,
                RequestPolicy(default=card.cores, valid_range=ValidRange(0, card.cores, 1)),
            ),
        },
        allow_multiple_allocations=True,
    )


def gpu_device_class(
    driver: str = DEFAULT_DRIVER, name: str | None = None, extended: str | None = EXTENDED_RESOURCE
) -> DeviceClass:
    """The DeviceClass of vgpu's GPUs: every device of the driver, named after the driver
    unless `name` is given; pods asking for `extended` (`nvidia.com/gpu`) get it as a claim
    where the cluster supports extended resources for DRA (None: no such mapping)."""
    return DeviceClass(name or driver, (f'device.driver == "{driver}"',), extended)


def node_slice(
    node: str, devices: Sequence[Device], driver: str = DEFAULT_DRIVER, generation: int = 1
) -> ResourceSlice:
    """The one slice of a node's GPUs: pool named after the node, at `generation`."""
    return ResourceSlice(
        name=f"{node}-{driver}",
        driver=driver,
        pool=ResourcePool(node, generation, 1),
        node_name=node,
        devices=tuple(devices),
    )


def published_cards(slices: Sequence[ResourceSlice], driver: str = DEFAULT_DRIVER) -> list[Card]:
    """The GPUs `driver` publishes in `slices`, as the cards vgpu's request rules read (uuid,
    index, product name as the card type, memory in MiB, cores, NUMA node); a device without a
    uuid or a memory capacity is not one of vgpu's GPUs and is left out."""
    cards = []
    for published in slices:
        if published.driver != driver:
            continue
        for device in published.devices:
            attributes = device.attributes
            uuid, memory = attributes.get("uuid"), device.capacity.get(MEMORY)
            if not isinstance(uuid, str) or memory is None:
                continue
            cores = device.capacity.get(CORES)
            cards.append(
                Card(
                    uuid=uuid,
                    index=_whole(attributes.get("index")),
                    type=str(attributes.get("productName") or ""),
                    count=1,
                    memory=memory.value // MIB,
                    cores=100 if cores is None else cores.value,
                    numa=_whole(attributes.get("numaNode")),
                )
            )
    return cards


def _whole(value: AttributeValue | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def driver_version(text: str) -> AttributeValue:
    """NVIDIA's driver version as a semantic version (`535.104.05` -> `535.104.5`: semver has
    no leading zeros; `550.54` -> `550.54.0`), or the text itself when it is not numeric.

    >>> driver_version("535.104.05"), driver_version("550.54"), driver_version("r550")
    (Version(text='535.104.5'), Version(text='550.54.0'), 'r550')
    """
    parts = text.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return text
    numbers = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return Version(".".join(numbers))


def gpu_share(result: DeviceRequestAllocationResult, driver: str = DEFAULT_DRIVER) -> GpuShare:
    """What `result` (a device of ours) consumes. The scheduler lists every capacity of the
    device, by the slice's name (`memory`) or the qualified one (`gpu.vgpu.io/memory`); an
    unknown or missing capacity is a DraError naming it."""
    at = Field(
        f"allocation result {result.request!r} ({result.pool}/{result.device})",
        "consumedCapacity",
        dict(result.consumed_capacity),
    )
    found: dict[str, int] = {}
    for name, value in result.consumed_capacity.items():
        short = name.removeprefix(f"{driver}/")
        if short not in (MEMORY, CORES):
            Field(at.obj, f"consumedCapacity[{name!r}]", value).fail(
                f"is a capacity {driver} does not publish (it publishes {MEMORY}, {CORES})"
            )
        if short in found:
            at.fail(f"names {short} twice")
        found[short] = value
    for name in (MEMORY, CORES):
        if name not in found:
            at.fail(f"has no {name}")
    return GpuShare(found[MEMORY], found[CORES])
