"""Events about pods, as the scheduler's use cases record them.

`PodEvents` is what the use cases need; the process records them through a bounded queue that
a background thread sends from (`events.EventQueue`). Only the leader writes: a follower's
events are dropped.
"""

from typing import Protocol


class PodEvents(Protocol):
    def record(
        self, namespace: str, pod: str, reason: str, message: str, *, warning: bool = False
    ) -> None: ...
