"""`migProfileAllowlist` (docs/protocol.md#mig-profile-allowlist): HAMi's validation and which profiles a GPU
publishes under it."""

import pytest

from vgpu.domain.mig import (
    AllowlistError,
    MigAllowlistEntry,
    MigPlacement,
    MigProfile,
    allowlisted_profiles,
    check_allowlist,
)

NVML = (
    MigProfile("1g.5gb", 1, 4864, 15, (MigPlacement(0, 1),), instances=7),
    MigProfile("2g.10gb", 2, 9856, 29, (MigPlacement(0, 2),), instances=3),
    MigProfile("7g.40gb", 7, 40192, 100, (MigPlacement(0, 8),), instances=1),
)
A100_40 = MigAllowlistEntry(("A100-SXM4-40GB", "A100-PCIE-40GB"), ("1g.5gb", "7g.39gb", "4g.20gb"))
A30 = MigAllowlistEntry(("A30",), ("1g.6gb",))


def test_the_first_entry_naming_the_model_decides_and_names_the_profiles() -> None:
    found = allowlisted_profiles("NVIDIA A100-SXM4-40GB", NVML, (A30, A100_40))

    assert found is not None
    # NVML's sizes and placements under the allowlist's names; 4g is not offered: left out
    assert [(p.name, p.memory_mib, p.placements) for p in found] == [
        ("1g.5gb", 4864, (MigPlacement(0, 1),)),
        ("7g.39gb", 40192, (MigPlacement(0, 8),)),
    ]


def test_a_model_no_entry_names_publishes_nothing() -> None:
    assert allowlisted_profiles("NVIDIA H100 80GB HBM3", NVML, (A30, A100_40)) is None
    assert allowlisted_profiles("NVIDIA A100-SXM4-40GB", NVML, ()) is None


def test_hami_defaults_pass_validation() -> None:
    check_allowlist((A30, A100_40, MigAllowlistEntry(("B200",), ("1g.23gb", "7g.180gb"))))


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (MigAllowlistEntry((), ("1g.5gb",)), "entry #1 (models [], profiles ['1g.5gb'])"),
        (MigAllowlistEntry(("A30",), ()), "needs at least one model and one profile"),
        (MigAllowlistEntry(("A30",), ("1g",)), "entry #1: profile '1g' is not a MIG profile"),
        (MigAllowlistEntry(("A30",), ("g.5gb",)), "profile 'g.5gb'"),
        (MigAllowlistEntry(("A30",), ("1x.5gb",)), "profile '1x.5gb'"),
    ],
)
def test_entries_hami_refuses_are_refused_naming_entry_and_value(
    entry: MigAllowlistEntry, problem: str
) -> None:
    with pytest.raises(AllowlistError) as raised:
        check_allowlist((A30, entry))
    assert problem in str(raised.value)
