"""Who may remove HAMi's node lock: its owner, or anyone for a legacy bare-time lock."""

import pytest

from vgpu.domain.nodelock import lock_releasable, parse_node_lock


@pytest.mark.parametrize(
    ("value", "releasable"),
    [
        ("2026-08-21T06:20:39Z,default,gpu-pod-1", True),
        ("2026-08-21T06:20:39Z,default,other-pod", False),
        ("2026-08-21T06:20:39Z,kube-system,gpu-pod-1", False),
        ("2026-08-21T06:20:39Z", True),  # legacy: HAMi wrote it without an owner
        ("2026-08-21T14:20:39+08:00", True),
    ],
)
def test_the_owner_or_anyone_for_a_legacy_lock_may_release(value: str, releasable: bool) -> None:
    assert lock_releasable(value, "default", "gpu-pod-1") is releasable


def test_a_legacy_lock_names_no_owner() -> None:
    legacy = parse_node_lock("2026-08-21T06:20:39Z")
    assert (legacy.namespace, legacy.pod) == ("", "")
    assert parse_node_lock("2026-08-21T06:20:39Z,default,gpu-pod-1").owned_by(
        "default", "gpu-pod-1"
    )
