"""The scheduler's usage ledger: usage per node and card, kept incrementally from grants and
releases (`book`), and the index that answers `Ledger.decide` without fitting every node
(`index`: per-node summaries, nodes ordered by fullness, rejections shared by alike nodes).

Only `Ledger` is public; the index is how it stays fast and gives the same answers as
`vgpu.domain.decide` over every node's view.
"""

from vgpu.domain.ledger.book import Ledger

__all__ = ["Ledger"]
