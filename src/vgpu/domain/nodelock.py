"""HAMi's node lock `hami.io/mutex.lock`: `<RFC3339 time>,<namespace>,<pod>` on the node.

Only the value rules live here: the value and its owner, when it expires (HAMi's
`HAMI_NODELOCK_EXPIRE`), and whether a pod takes a vendor's lock at all. Taking it with a
resourceVersion precondition is the cluster port's job (`vgpu.ports.node_lock` for one pod).

>>> node_lock_value(datetime.fromisoformat("2026-07-03T15:35:10+00:00"), "ml", "train")
'2026-07-03T15:35:10Z,ml,train'
>>> node_lock_expiry({"HAMI_NODELOCK_EXPIRE": "1m30s"})
datetime.timedelta(seconds=90)
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from vgpu.domain.errors import DomainError
from vgpu.domain.pod import Pod
from vgpu.domain.quantity import parse_quantity
from vgpu.domain.request import request_values
from vgpu.domain.vendor import Vendor

DEFAULT_EXPIRY = timedelta(minutes=5)
EXPIRY_VARIABLE = "HAMI_NODELOCK_EXPIRE"
OWNER_SEPARATOR = ","
# How far ahead of our clock another writer's clock may run. A lock dated further ahead than this
# would never expire within the expiry, blocking the node for good, so it counts as invalid.
DEFAULT_CLOCK_SKEW = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class NodeLock:
    """One lock value: when it was taken and by which pod (none in the legacy bare form).

    >>> parse_node_lock("2026-07-03T15:35:10+08:00,ml,train").owned_by("ml", "train")
    True
    """

    taken_at: datetime
    namespace: str = ""
    pod: str = ""

    def encode(self) -> str:
        """The annotation value, HAMi's form: `RFC3339 time,namespace,pod`."""
        stamp = self.taken_at.isoformat(timespec="seconds").replace("+00:00", "Z")
        return f"{stamp},{self.namespace},{self.pod}"

    def owned_by(self, namespace: str, pod: str) -> bool:
        """Whether `namespace/pod` took the lock."""
        return (self.namespace, self.pod) == (namespace, pod)

    def expired(self, now: datetime, expiry: timedelta = DEFAULT_EXPIRY) -> bool:
        """Whether the lock is older than `expiry` at `now` (anyone may then take it)."""
        return now - self.taken_at > expiry

    def from_the_future(self, now: datetime, skew: timedelta = DEFAULT_CLOCK_SKEW) -> bool:
        """Dated later than `now` by more than the clock skew allowance: not a real lock."""
        return self.taken_at - now > skew


def parse_node_lock(value: str) -> NodeLock:
    """Read both HAMi forms: `time,ns,name` and the legacy bare time."""
    stamp, _, owner = value.strip().partition(",")
    namespace, _, pod = owner.partition(",")
    try:
        taken_at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError as exc:
        raise DomainError(f"node lock {value!r}: {stamp!r} is not an RFC3339 time") from exc
    if taken_at.tzinfo is None:
        raise DomainError(f"node lock {value!r}: time {stamp!r} has no zone")
    return NodeLock(taken_at, namespace, pod)


def lock_releasable(value: str, namespace: str, pod: str) -> bool:
    """Whether `namespace/pod` may remove the lock `value` after its Allocate (HAMi's rule).

    A lock that ends with the pod's owner part is its own, whether or not its time can be read;
    one that names no owner at all (a legacy bare time, or anything without a comma) is
    released too: the HAMi versions that wrote bare times released without an owner check,
    and no pod could ever prove it owns one, so refusing would keep the node locked until the
    lock expires.

    >>> lock_releasable("2026-07-03T15:35:10Z,ml,train", "ml", "train")
    True
    >>> lock_releasable("not-a-time,ml,train", "ml", "train")
    True
    >>> lock_releasable("2026-07-03T15:35:10Z,ml,eval", "ml", "train")
    False
    """
    owner = OWNER_SEPARATOR + lock_owner(namespace, pod)
    return OWNER_SEPARATOR not in value or value.endswith(owner)


def lock_owner(namespace: str, pod: str, separator: str = OWNER_SEPARATOR) -> str:
    """The pod's part of a lock value, `namespace,pod` (HAMi's GeneratePodNamespaceName).

    >>> lock_owner("ml", "train"), lock_owner("ml", "train", "@@")
    ('ml,train', 'ml@@train')
    """
    return f"{namespace}{separator}{pod}"


def node_lock_value(now: datetime, namespace: str, pod: str) -> str:
    """The lock a pod writes at `now` (HAMi's GenerateNodeLockKeyByPod): RFC3339 to the second
    with the zone, `Z` for UTC. `now` must carry its zone, else the time would be ambiguous."""
    if now.tzinfo is None:
        raise DomainError(f"node lock time {now.isoformat()} has no zone")
    return NodeLock(now, namespace, pod).encode()


def node_lock_expiry(environ: Mapping[str, str]) -> timedelta:
    """How old a lock must be for another pod to take it over: `HAMI_NODELOCK_EXPIRE` (a Go
    duration such as `5m` or `1h30m`), 5 minutes when unset or empty. A value that is not a
    positive duration raises DomainError naming it (HAMi logs it and keeps 5 minutes)."""
    text = environ.get(EXPIRY_VARIABLE, "")
    if not text:
        return DEFAULT_EXPIRY
    try:
        expiry = parse_go_duration(text)
    except ValueError as exc:
        raise DomainError(f"{EXPIRY_VARIABLE}={text!r}: {exc}") from None
    if expiry <= timedelta(0):
        raise DomainError(f"{EXPIRY_VARIABLE}={text!r}: a lock must live a while, not {expiry}")
    return expiry


def parse_go_duration(text: str) -> timedelta:
    """A duration as Go's time.ParseDuration reads it (`300ms`, `-1.5h`, `2h45m`), to the
    microsecond; ValueError says why `text` is not one.

    >>> parse_go_duration("2h45m0.5s")
    datetime.timedelta(seconds=9900, microseconds=500000)
    """
    sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text.removeprefix("+"))
    if body == "0":
        return timedelta(0)
    parts = _GO_DURATION_PART.findall(body) if _GO_DURATION.fullmatch(body) else []
    if not parts:
        raise ValueError(f"{text!r} is not a Go duration such as 5m, 90s or 1h30m")
    nanoseconds = sum(Decimal(number) * _GO_UNITS[unit] for number, unit in parts)
    if nanoseconds > _GO_MAX_NANOSECONDS:
        raise ValueError(f"{text!r} is longer than a Go duration can be (about 292 years)")
    return sign * timedelta(microseconds=int(nanoseconds / 1000))


def locks_node(pod: Pod, vendor: Vendor) -> bool:
    """Whether HAMi takes `vendor`'s node lock for the pod: some app container asks for a
    positive whole number of its cards (init containers do not count, as in HAMi).

    >>> from vgpu.domain.pod import Container
    >>> from vgpu.domain.vendor import NVIDIA
    >>> locks_node(Pod("ml", "train", containers=(Container("c", {"nvidia.com/gpu": 1}),)), NVIDIA)
    True
    """
    return any(
        _whole_positive(request_values(container).get(vendor.count_resource))
        for container in pod.containers
        if not container.is_init
    )


def _whole_positive(value: Any) -> bool:
    if value is None:
        return False
    try:
        number = parse_quantity(value)
    except ValueError:
        return False
    return number > 0 and number == number.to_integral_value()


_GO_UNITS = {
    "ns": Decimal(1),
    "us": Decimal(1_000),
    "\u00b5s": Decimal(1_000),
    "\u03bcs": Decimal(1_000),
    "ms": Decimal(1_000_000),
    "s": Decimal(1_000_000_000),
    "m": Decimal(60_000_000_000),
    "h": Decimal(3_600_000_000_000),
}
_GO_MAX_NANOSECONDS = 2**63 - 1
_GO_NUMBER = r"(\d+\.?\d*|\.\d+)"
_GO_UNIT = "(" + "|".join(sorted(_GO_UNITS, key=len, reverse=True)) + ")"
_GO_DURATION_PART = re.compile(_GO_NUMBER + _GO_UNIT)
_GO_DURATION = re.compile(f"(?:{_GO_NUMBER}{_GO_UNIT})+")
