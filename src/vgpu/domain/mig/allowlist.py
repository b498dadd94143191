"""`migProfileAllowlist` (docs/protocol.md#mig-profile-allowlist): which MIG profiles a GPU model
may be cut into.

Each entry names GPU models (substrings of the NVML name) and profile names. The first entry
with a model inside the GPU's name decides: the GPU publishes exactly those profiles, each under
its allowlisted name with the size, cores and placements NVML gives for its slice group (the
part before the first `.`). A GPU that no entry names publishes none, so it is not registered.

>>> offered = (MigProfile("1g.5gb", 1, 4864, 15, (MigPlacement(0, 1),)),)
>>> entries = (MigAllowlistEntry(("A100-SXM4-40GB",), ("1g.5gb", "2g.10gb")),)
>>> [p.name for p in allowlisted_profiles("NVIDIA A100-SXM4-40GB", offered, entries)]
['1g.5gb']
>>> allowlisted_profiles("NVIDIA H100 80GB HBM3", offered, entries) is None
True
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace

from vgpu.domain.errors import DomainError
from vgpu.domain.mig.profiles import MigProfile


class AllowlistError(DomainError):
    """An allowlist entry HAMi would refuse; the message names the entry and the value."""


@dataclass(frozen=True, slots=True)
class MigAllowlistEntry:
    models: tuple[str, ...]
    profiles: tuple[str, ...]


def slice_group(profile: str) -> str:
    """The part of a profile name that selects NVML's profile: `3g.20gb` -> `3g`."""
    return profile.partition(".")[0]


def check_allowlist(entries: Sequence[MigAllowlistEntry]) -> None:
    """HAMi's rules: every entry has models and profiles, and each profile reads `<N>g.<rest>`
    (the part before the first `.` at least two characters, ending in `g`)."""
    for position, entry in enumerate(entries):
        where = f"migProfileAllowlist entry #{position}"
        if not entry.models or not entry.profiles:
            raise AllowlistError(
                f"{where} (models {list(entry.models)}, profiles {list(entry.profiles)}): "
                "needs at least one model and one profile"
            )
        for profile in entry.profiles:
            head, dot, _ = profile.partition(".")
            if not dot or len(head) < 2 or not head.endswith("g"):
                raise AllowlistError(
                    f"{where}: profile {profile!r} is not a MIG profile name such as 1g.10gb"
                )


def allowlisted_profiles(
    gpu_name: str, offered: Sequence[MigProfile], entries: Sequence[MigAllowlistEntry]
) -> tuple[MigProfile, ...] | None:
    """The profiles a GPU publishes under the allowlist; None when no entry names its model.

    An allowlisted name whose slice group the GPU does not offer is left out, as HAMi skips a
    profile NVML cannot describe.
    """
    entry = next((e for e in entries if any(m in gpu_name for m in e.models)), None)
    if entry is None:
        return None
    by_group: dict[str, MigProfile] = {}
    for profile in offered:
        by_group.setdefault(slice_group(profile.name), profile)
    return tuple(
        replace(by_group[slice_group(name)], name=name)
        for name in entry.profiles
        if slice_group(name) in by_group
    )
