"""Where MIG instances sit on a card (HAMi v2.10's rules): the placement a profile gets, whether
a set of profiles fits beside the instances already there, and HAMi's legacy template UUIDs.

`1g.` and `3g.` instances go from the top of the card down, every other profile from the bottom
up, which keeps room for the large profiles.

>>> one = MigProfile("1g.5gb", 1, 5120, 14, tuple(MigPlacement(i, 1) for i in range(7)))
>>> two = MigProfile("2g.10gb", 2, 10240, 28, tuple(MigPlacement(i, 2) for i in (0, 2, 4)))
>>> three = MigProfile("3g.20gb", 3, 20480, 42, (MigPlacement(0, 4), MigPlacement(4, 4)))
>>> mig_placement((one, two, three), [MigPlacement(4, 4)], "2g.10gb")
MigPlacement(start=0, size=2)
>>> can_place_mig_profiles((one, two, three), [], ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
True
"""

from collections.abc import Iterable, Sequence

from vgpu.domain.errors import DomainError, brief
from vgpu.domain.hostile_text import INT64, whole_number
from vgpu.domain.mig.profiles import MigPlacement, MigProfile

_FROM_THE_TOP = ("1g.", "3g.")


def placement_order(profile: MigProfile) -> tuple[MigPlacement, ...]:
    """The profile's placements in the order they are tried."""
    from_top = profile.name.startswith(_FROM_THE_TOP)
    return tuple(sorted(profile.placements, key=lambda p: p.start, reverse=from_top))


def mig_placement(
    profiles: Iterable[MigProfile], occupied: Iterable[MigPlacement], name: str
) -> MigPlacement | None:
    """Where an instance of profile `name` goes beside the `occupied` placements (HAMi's
    selectMigPlacement); None when the card has no such profile or no placement is free."""
    profile = next((p for p in profiles if p.name == name), None)
    if profile is None:
        return None
    taken = list(occupied)
    return next((p for p in placement_order(profile) if not _overlaps_any(p, taken)), None)


def can_place_mig_profiles(
    profiles: Iterable[MigProfile], occupied: Iterable[MigPlacement], requested: Sequence[str]
) -> bool:
    """Whether one instance of each `requested` profile (names may repeat) can be placed at
    once beside the `occupied` placements, none overlapping (HAMi's canPlaceMigProfiles: the
    profiles with the fewest placements first, each tried in `placement_order`, backtracking)."""
    by_name = {profile.name: profile for profile in profiles}
    ordered = sorted(requested, key=lambda name: _scarcity(by_name.get(name)))
    used = list(occupied)

    def place(position: int) -> bool:
        if position == len(ordered):
            return True
        profile = by_name.get(ordered[position])
        for candidate in () if profile is None else placement_order(profile):
            if _overlaps_any(candidate, used):
                continue
            used.append(candidate)
            if place(position + 1):
                return True
            used.pop()
        return False

    return place(0)


def legacy_mig_template(uuid: str) -> tuple[int, int]:
    """The template and slot in a MIG device id of HAMi's older releases, `GPU-...[7-9]`
    (its ExtractMigTemplatesFromUUID); DomainError when `uuid` holds none.

    >>> legacy_mig_template("GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[7-9]")
    (7, 9)
    """
    left, right = uuid.find("["), uuid.find("]")
    parts = uuid[left + 1 : right].split("-") if 0 <= left < right else []
    try:
        if len(parts) == 2:
            return whole_number(parts[0], *INT64), whole_number(parts[1], *INT64)
    except ValueError:
        pass
    raise DomainError(f"{brief(uuid)} is not a legacy MIG device id such as GPU-...[1-2]")


def _scarcity(profile: MigProfile | None) -> tuple[int, int]:
    """Sort key: fewer placements first, then the larger instances."""
    if profile is None or not profile.placements:
        return (0, 0)
    return (len(profile.placements), -profile.placements[0].size)


def _overlaps_any(placement: MigPlacement, others: Iterable[MigPlacement]) -> bool:
    return any(placement.overlaps(other) for other in others)
