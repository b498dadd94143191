"""HAMi's node lock `hami.io/mutex.lock`: `<RFC3339 time>,<namespace>,<pod>` on the node.

Only the value rules live here; taking the lock with a resourceVersion precondition is the
cluster adapter's job.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from vgpu.domain.errors import DomainError

DEFAULT_EXPIRY = timedelta(minutes=5)
# How far ahead of our clock another writer's clock may run. A lock dated further ahead than this
# would never expire within the expiry, blocking the node for good, so it counts as invalid.
DEFAULT_CLOCK_SKEW = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class NodeLock:
    taken_at: datetime
    namespace: str = ""
    pod: str = ""

    def encode(self) -> str:
        stamp = self.taken_at.isoformat(timespec="seconds").replace("+00:00", "Z")
        return f"{stamp},{self.namespace},{self.pod}"

    def owned_by(self, namespace: str, pod: str) -> bool:
        return (self.namespace, self.pod) == (namespace, pod)

    def expired(self, now: datetime, expiry: timedelta = DEFAULT_EXPIRY) -> bool:
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
