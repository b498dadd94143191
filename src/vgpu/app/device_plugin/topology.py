"""The node's GPU pair scores for `hami.io/node-nvidia-score`
(docs/protocol.md#node-score-annotation).

Read from the GPU port once per set of registered GPUs (links do not change while the node
runs) and kept; a failed reading is logged and tried again at the next registration, where
HAMi's plugin would wait for its device list to change.
"""

import logging
from collections.abc import Sequence

from vgpu.domain.topology import encode_pair_scores, pair_scores
from vgpu.ports.gpu import GpuPort, GpuUnavailable

log = logging.getLogger(__name__)


class TopologyScores:
    def __init__(self, port: GpuPort) -> None:
        self._port = port
        self._uuids: tuple[str, ...] | None = None
        self._annotation = ""

    def annotation(self, uuids: Sequence[str]) -> str | None:
        """The annotation value scoring the pairs among `uuids`; None when it cannot be read."""
        key = tuple(uuids)
        if key == self._uuids:
            return self._annotation
        wanted = set(key)
        try:
            links = [
                link
                for link in self._port.read_topology()
                if link.source in wanted and link.target in wanted
            ]
        except GpuUnavailable as exc:
            log.error("cannot publish GPU topology scores: %s", exc)
            return None
        topology = pair_scores(links)
        for source, target in topology.asymmetric:
            log.warning(
                "GPUs %s and %s report different NVLink counts to each other "
                "(AsymmetricGPUP2PLink); their pair scores 0",
                source,
                target,
            )
        ordered = {uuid: topology.scores.get(uuid, {}) for uuid in key}
        self._uuids, self._annotation = key, encode_pair_scores(ordered)
        return self._annotation
