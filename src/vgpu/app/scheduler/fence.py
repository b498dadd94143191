"""Only the leader writes: every write the scheduler makes first asks the fence."""

from collections.abc import Callable

from vgpu.ports.cluster import Rejected


class NotLeader(Rejected):
    """Nothing was written: this replica is not (or no longer) the leader."""


class Fence:
    def __init__(self, is_leader: Callable[[], bool]) -> None:
        self._is_leader = is_leader

    @property
    def leading(self) -> bool:
        return self._is_leader()

    def check(self, what: str) -> None:
        """Raise NotLeader (naming `what` was not done) unless this replica leads now."""
        if not self._is_leader():
            raise NotLeader(f"{what} not written: this scheduler replica is not the leader")
