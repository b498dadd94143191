"""MIG placements: slices `[start, start+size)` that two instances may not share."""

import pytest

from vgpu.domain.mig import MigPlacement


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ((0, 4), (4, 4), False),
        ((0, 4), (3, 1), True),
        ((2, 2), (0, 8), True),
        ((6, 1), (5, 1), False),
        ((0, 1), (0, 1), True),
    ],
)
def test_placements_overlap_when_they_share_a_slice(
    a: tuple[int, int], b: tuple[int, int], overlap: bool
) -> None:
    assert MigPlacement(*a).overlaps(MigPlacement(*b)) is overlap
    assert MigPlacement(*b).overlaps(MigPlacement(*a)) is overlap


@pytest.mark.parametrize(("start", "size"), [(-1, 1), (0, 0)])
def test_an_impossible_placement_is_refused(start: int, size: int) -> None:
    with pytest.raises(ValueError, match=f"start={start} size={size}"):
        MigPlacement(start, size)
