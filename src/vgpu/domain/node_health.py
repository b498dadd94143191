"""What a HAMi scheduler remembers of each node between health passes, and forgetting it.

HAMi keeps, per node, the GPU count kubelet last reported and the register annotation last read
(its ReportedGPUNum and ReportedRegisterAnnos), and clears both when the node is deleted (its
NodeDeleted): a node created again under the same name then starts clean instead of looking
like a node whose GPUs just went away.

>>> book = NodeHealthBook(HamiVersion.V2_10)
>>> book.check("n1", None, 4, datetime(2026, 8, 21, 6, 20, 39), register="[]").refresh
True
>>> book.memory("n1")
NodeMemory(reported=4, register='[]')
>>> book.node_deleted("n1")
>>> book.memory("n1") is None
True
"""

from collections.abc import Iterable
from datetime import datetime

from vgpu.domain.handshake import HamiVersion, HandshakeVerdict, NodeMemory, check_node


class NodeHealthBook:
    """The per-node memory of `check_node` for one HAMi version. Not thread-safe: the caller
    serialises passes and deletions."""

    def __init__(self, version: HamiVersion) -> None:
        self._version = version
        self._memory: dict[str, NodeMemory] = {}

    def check(
        self,
        node: str,
        handshake: str | None,
        allocatable: int,
        now: datetime,
        register: str | None = None,
    ) -> HandshakeVerdict:
        """`check_node` for the node with what was remembered of it, remembering the result."""
        verdict = check_node(
            self._version, handshake, allocatable, now, self._memory.get(node), register
        )
        self._memory[node] = verdict.memory
        return verdict

    def memory(self, node: str) -> NodeMemory | None:
        """What is remembered of the node; None for a node never checked or forgotten."""
        return self._memory.get(node)

    def node_deleted(self, node: str) -> None:
        """Forget the node (HAMi's NodeDeleted); harmless for a node never checked."""
        self._memory.pop(node, None)

    def keep_only(self, nodes: Iterable[str]) -> None:
        """Forget every node not among `nodes` (those a full listing no longer shows)."""
        listed = set(nodes)
        for gone in [node for node in self._memory if node not in listed]:
            del self._memory[gone]
