"""The served record in memory, with the faults a host file can have."""

from collections.abc import Sequence

from vgpu.domain.trust import ServedGrant
from vgpu.ports.served import RecordCorrupt, RecordError


class FakeServedRecord:
    """Implements ServedRecordPort in memory. `write_error` / `read_error` make the next saves
    / loads fail with that message; `corrupt` makes loads find a damaged record until it is
    set aside."""

    def __init__(self, grants: Sequence[ServedGrant] = ()) -> None:
        self.grants: list[ServedGrant] = list(grants)
        self.node = ""
        self.saves = 0
        self.write_error = ""
        self.read_error = ""
        self.corrupt = ""
        self.set_aside_count = 0

    @property
    def location(self) -> str:
        return "memory:served.json"

    def load(self) -> list[ServedGrant]:
        if self.read_error:
            raise RecordError(f"cannot read served record {self.location}: {self.read_error}")
        if self.corrupt:
            raise RecordCorrupt(f"served record {self.location} does not read: {self.corrupt}")
        return list(self.grants)

    def save(self, node: str, grants: Sequence[ServedGrant]) -> None:
        if self.write_error:
            raise RecordError(f"cannot write served record {self.location}: {self.write_error}")
        self.node = node
        self.grants = list(grants)
        self.saves += 1

    def set_aside(self) -> str:
        self.corrupt = ""
        self.grants = []
        self.set_aside_count += 1
        return f"{self.location}.corrupt"
