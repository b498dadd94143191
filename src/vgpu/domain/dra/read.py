"""`resource.k8s.io/v1` JSON (as the API server serves it) into the values of `model.py`.

A field that cannot be read raises DraError naming the object, the path and the value:
negative, fractional or huge quantities, names that are not qualified names, unknown
allocation modes, wrong types. Fields vgpu does not use (opaque configs, tolerations, taints,
counters) are ignored.
"""

from typing import Any

from vgpu.domain.dra.model import (
    SEMVER,
    AllocationMode,
    AllocationResult,
    AttributeValue,
    ConsumerReference,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    RequestPolicy,
    ResourceClaim,
    ResourcePool,
    ResourceSlice,
    ValidRange,
    Version,
)
from vgpu.domain.dra.reader import INT64_MAX, Field

MAX_EXPRESSION = 10 * 1024  # characters of a CEL selector, as the API server allows
MAX_ATTRIBUTE_TEXT = 64  # a string or version attribute, as the API server allows


def parse_resource_slice(document: Any) -> ResourceSlice:
    """A ResourceSlice from its JSON; DraError names the field that cannot be read."""
    root = Field.root("ResourceSlice", document)
    spec = root.key("spec")
    pool = spec.key("pool")
    return ResourceSlice(
        name=root.key("metadata").key("name").text(),
        driver=spec.key("driver").text(limit=63),
        pool=ResourcePool(
            pool.key("name").text(),
            pool.key("generation").whole(0, INT64_MAX),
            pool.key("resourceSliceCount").whole(1, INT64_MAX),
        ),
        node_name=spec.key("nodeName").optional_text(),
        devices=tuple(_device(d) for d in spec.key("devices").items()),
        all_nodes=spec.key("allNodes").flag(),
    )


def parse_resource_claim(document: Any) -> ResourceClaim:
    """A ResourceClaim from its JSON (spec and status); DraError names the field."""
    root = Field.root("ResourceClaim", document)
    meta = root.key("metadata")
    devices = root.key("spec").key("devices")
    status = root.key("status")
    allocation = status.key("allocation")
    return ResourceClaim(
        name=meta.key("name").text(),
        namespace=meta.key("namespace").text(),
        uid=meta.key("uid").text(limit=128, empty=True),
        requests=tuple(_request(r) for r in devices.key("requests").items()),
        constraints=tuple(_constraint(c) for c in devices.key("constraints").items()),
        allocation=_allocation(allocation) if allocation.present else None,
        reserved_for=tuple(_consumer(c) for c in status.key("reservedFor").items()),
    )


def parse_device_class(document: Any) -> DeviceClass:
    """A DeviceClass from its JSON; DraError names the field."""
    root = Field.root("DeviceClass", document)
    spec = root.key("spec")
    return DeviceClass(
        name=root.key("metadata").key("name").text(),
        selectors=_selectors(spec.key("selectors")),
        extended_resource_name=spec.key("extendedResourceName").optional_text(),
    )


def _device(at: Field) -> Device:
    return Device(
        name=at.key("name").text(limit=63),
        attributes={name: _attribute(value) for name, value in _named(at.key("attributes"))},
        capacity={name: _capacity(value) for name, value in _named(at.key("capacity"))},
        allow_multiple_allocations=at.key("allowMultipleAllocations").flag(),
    )


def _named(at: Field) -> list[tuple[str, Field]]:
    """The entries of a map keyed by qualified names (attributes, capacities), each key
    checked: a bad name is reported with the name as the value."""
    return [
        (Field(at.obj, value.path, name).qualified_name(), value) for name, value in at.entries()
    ]


def _attribute(at: Field) -> AttributeValue:
    kinds = [k for k in ("int", "bool", "string", "version") if at.key(k).present]
    if len(kinds) != 1:
        at.fail("must have exactly one of int, bool, string, version")
    value = at.key(kinds[0])
    if kinds[0] == "int":
        return value.whole(-(2**63), INT64_MAX)
    if kinds[0] == "bool":
        return value.flag()
    if kinds[0] == "string":
        return value.text(limit=MAX_ATTRIBUTE_TEXT, empty=True)
    text = value.text(limit=MAX_ATTRIBUTE_TEXT)
    if not SEMVER.fullmatch(text):
        value.fail("is not a semantic version (MAJOR.MINOR.PATCH)")
    return Version(text)


def _capacity(at: Field) -> DeviceCapacity:
    policy = at.key("requestPolicy")
    return DeviceCapacity(at.key("value").quantity(), _policy(policy) if policy.present else None)


def _policy(at: Field) -> RequestPolicy:
    default = at.key("default")
    valid_range = at.key("validRange")
    return RequestPolicy(
        default=default.quantity() if default.present else None,
        valid_values=tuple(v.quantity() for v in at.key("validValues").items()),
        valid_range=_range(valid_range) if valid_range.present else None,
    )


def _range(at: Field) -> ValidRange:
    top, step = at.key("max"), at.key("step")
    step_value = step.quantity() if step.present else None
    if step_value == 0:
        step.fail("is zero (a step is at least 1)")
    return ValidRange(
        min=at.key("min").quantity(),
        max=top.quantity() if top.present else None,
        step=step_value,
    )


def _request(at: Field) -> DeviceRequest:
    exactly, first = at.key("exactly"), at.key("firstAvailable")
    if exactly.present == bool(first.items()):
        at.fail("must have exactly one of exactly, firstAvailable")
    name = at.key("name").text(limit=63)
    if exactly.present:
        return DeviceRequest(
            name,
            exactly=ExactDeviceRequest(
                device_class_name=exactly.key("deviceClassName").text(),
                selectors=_selectors(exactly.key("selectors")),
                allocation_mode=_mode(exactly.key("allocationMode")),
                count=_count(exactly),
                admin_access=exactly.key("adminAccess").flag(),
                capacity=_capacity_requests(exactly.key("capacity")),
            ),
        )
    return DeviceRequest(
        name,
        first_available=tuple(
            DeviceSubRequest(
                name=sub.key("name").text(limit=63),
                device_class_name=sub.key("deviceClassName").text(),
                selectors=_selectors(sub.key("selectors")),
                allocation_mode=_mode(sub.key("allocationMode")),
                count=_count(sub),
                capacity=_capacity_requests(sub.key("capacity")),
            )
            for sub in first.items()
        ),
    )


def _selectors(at: Field) -> tuple[str, ...]:
    expressions = []
    for selector in at.items():
        cel = selector.key("cel")
        if not cel.present:
            selector.fail("has no cel expression (CEL is the only kind of selector)")
        expressions.append(cel.key("expression").text(limit=MAX_EXPRESSION))
    return tuple(expressions)


def _mode(at: Field) -> AllocationMode:
    if not at.present:
        return AllocationMode.EXACT_COUNT
    text = at.text()
    try:
        return AllocationMode(text)
    except ValueError:
        at.fail("is not an allocation mode (ExactCount or All)")


def _count(at: Field) -> int:
    """`count`: at least 1 for ExactCount (default 1); All ignores it."""
    least = 0 if _mode(at.key("allocationMode")) is AllocationMode.ALL else 1
    return at.key("count").whole(least, INT64_MAX, default=1)


def _capacity_requests(at: Field) -> dict[str, int]:
    return {name: value.quantity() for name, value in _named(at.key("requests"))}


def _constraint(at: Field) -> DeviceConstraint:
    match, distinct = at.key("matchAttribute"), at.key("distinctAttribute")
    if match.present == distinct.present:
        at.fail("must have exactly one of matchAttribute, distinctAttribute")
    attribute = match if match.present else distinct
    name = attribute.qualified_name()
    if "/" not in name:
        attribute.fail("must be a fully qualified name (domain/identifier)")
    return DeviceConstraint(
        requests=tuple(r.text(limit=127) for r in at.key("requests").items()),
        match_attribute=name if match.present else None,
        distinct_attribute=name if distinct.present else None,
    )


def _allocation(at: Field) -> AllocationResult:
    return AllocationResult(
        results=tuple(_result(r) for r in at.key("devices").key("results").items()),
        node_name=_selected_node(at.key("nodeSelector")),
    )


def _result(at: Field) -> DeviceRequestAllocationResult:
    share = at.key("shareID")
    return DeviceRequestAllocationResult(
        request=at.key("request").text(limit=127),
        driver=at.key("driver").text(limit=63),
        pool=at.key("pool").text(),
        device=at.key("device").text(limit=63),
        admin_access=at.key("adminAccess").flag(),
        share_id=share.text(limit=128) if share.present else None,
        consumed_capacity=_capacity_map(at.key("consumedCapacity")),
    )


def _capacity_map(at: Field) -> dict[str, int]:
    return {name: value.quantity() for name, value in _named(at)}


def _selected_node(at: Field) -> str | None:
    """The node of a selector `metadata.name In [node]` (what kube-scheduler writes for
    node-local devices); None for any other selector."""
    terms = at.key("nodeSelectorTerms").items()
    if len(terms) != 1:
        return None
    fields = terms[0].key("matchFields").items()
    if len(fields) != 1 or terms[0].key("matchExpressions").items():
        return None
    requirement = fields[0]
    values = requirement.key("values").items()
    if (
        requirement.key("key").value != "metadata.name"
        or requirement.key("operator").value != "In"
        or len(values) != 1
    ):
        return None
    return values[0].text()


def _consumer(at: Field) -> ConsumerReference:
    return ConsumerReference(
        resource=at.key("resource").text(limit=63),
        name=at.key("name").text(),
        uid=at.key("uid").text(limit=128),
        api_group=at.key("apiGroup").text(empty=True),
    )
