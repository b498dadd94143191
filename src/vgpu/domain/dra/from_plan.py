"""A pod's `nvidia.com/gpu*` request written as a ResourceClaim for vgpu's DRA devices.

One request per container that asks for GPUs, named after the container, for `count` devices
of vgpu's class, each consuming:

- `cores`: the container's `gpucores` (0: no limit on compute);
- `memory`: `gpumem` in bytes; all of each card when it asks 100 % (the capacity's default);
  for a smaller `gpumem-percentage`, which DRA cannot say, one `firstAvailable` subrequest per
  card size in the cluster, each selecting cards of that size and asking its share of them;
- card choices (`use-gputype`, `nouse-gputype`, `use-gpuuuid`, `nouse-gpuuuid`) become
  selectors on `productName` and `uuid`, naming the cluster's product names that the choice
  matches (vgpu matches types by whole words, which CEL's subset cannot say); `numa-bind` a
  `matchAttribute` on `numaNode` over the container's devices.

What DRA has no word for is left out: the split count (a device takes as many shares as its
capacities hold) and vgpu's namespace GPU quota. A MIG-only request cannot be written (vgpu's
DRA devices are whole cards shared by HAMi-core).
"""

import re
from collections.abc import Sequence

from vgpu.domain.device import HAMI_CORE_MODE, Device
from vgpu.domain.dra.gpu import CORES, DEFAULT_DRIVER, MEMORY, MIB
from vgpu.domain.dra.model import (
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    ExactDeviceRequest,
    ResourceClaim,
)
from vgpu.domain.errors import DomainError
from vgpu.domain.fit import PodPlan
from vgpu.domain.request import ContainerRequest

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def plan_claim(
    plan: PodPlan,
    cards: Sequence[Device],
    driver: str = DEFAULT_DRIVER,
    device_class: str | None = None,
    uid: str = "",
) -> ResourceClaim:
    """The claim for the pod `plan` describes, against a cluster with these `cards` (for
    percentages and type choices); named `<pod>-gpu` in the pod's namespace. DomainError
    when the request cannot be written as a claim."""
    selector = plan.selector
    if selector.modes and HAMI_CORE_MODE not in selector.modes:
        raise DomainError(
            f"pod {plan.key}: asks for {', '.join(selector.modes)} cards, and vgpu's DRA devices "
            "are whole cards shared by HAMi-core"
        )
    chosen = [c for c in cards if selector.type_ok(c)]
    selectors = _card_selectors(plan, chosen, driver)
    class_name = device_class or driver
    requests = []
    constraints = []
    for index, (container, request) in enumerate(zip(plan.containers, plan.requests, strict=True)):
        if request is None:
            continue
        name = container if _DNS_LABEL.fullmatch(container) else f"container-{index}"
        requests.append(_request(name, request, chosen, driver, class_name, selectors))
        if selector.numa_bind and request.count > 1:
            constraints.append(DeviceConstraint((name,), match_attribute=f"{driver}/numaNode"))
    namespace, _, pod = plan.key.partition("/")
    return ResourceClaim(
        name=f"{pod}-gpu",
        namespace=namespace,
        uid=uid,
        requests=tuple(requests),
        constraints=tuple(constraints),
    )


def _request(
    name: str,
    request: ContainerRequest,
    cards: Sequence[Device],
    driver: str,
    class_name: str,
    selectors: tuple[str, ...],
) -> DeviceRequest:
    capacity = {CORES: request.cores}
    if request.memory > 0:
        capacity[MEMORY] = request.memory * MIB
    elif request.memory_percent < 100:
        sizes = sorted({card.memory for card in cards}, reverse=True)
        return DeviceRequest(
            name,
            first_available=tuple(
                DeviceSubRequest(
                    f"card-{size}mi",
                    class_name,
                    (*selectors, _of_size(driver, size)),
                    count=request.count,
                    capacity={**capacity, MEMORY: size * request.memory_percent // 100 * MIB},
                )
                for size in sizes
            )
            or (DeviceSubRequest("no-card", class_name, ("false",), count=request.count),),
        )
    return DeviceRequest(
        name,
        exactly=ExactDeviceRequest(class_name, selectors, count=request.count, capacity=capacity),
    )


def _of_size(driver: str, size_mib: int) -> str:
    return f'device.capacity["{driver}"].memory.compareTo(quantity("{size_mib}Mi")) == 0'


def _card_selectors(plan: PodPlan, cards: Sequence[Device], driver: str) -> tuple[str, ...]:
    selector = plan.selector
    attributes = f'device.attributes["{driver}"]'
    found = []
    if selector.use_types or selector.avoid_types:
        products = sorted({card.type for card in cards})
        found.append(f"{attributes}.productName in [{_strings(products)}]")
    if selector.use_uuids:
        found.append(f"{attributes}.uuid in [{_strings(sorted(selector.use_uuids))}]")
    if selector.avoid_uuids:
        found.append(f"!({attributes}.uuid in [{_strings(sorted(selector.avoid_uuids))}])")
    return tuple(found)


def _strings(values: Sequence[str]) -> str:
    return ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
