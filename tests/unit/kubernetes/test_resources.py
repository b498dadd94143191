"""Converting listed objects: ResourceQuotas and cache keys."""

import pytest

from vgpu.adapters.kubernetes.resources import manifest_key, quota_from_manifest
from vgpu.ports.cluster import Kind, Quota


def test_a_quota_keeps_its_namespace_name_and_hard_limits() -> None:
    quota = quota_from_manifest(
        {
            "metadata": {"name": "gpu", "namespace": "team"},
            "spec": {"hard": {"limits.nvidia.com/gpumem": "2000", "pods": "10"}},
        }
    )
    assert quota == Quota("team", "gpu", {"limits.nvidia.com/gpumem": "2000", "pods": "10"})
    assert quota_from_manifest({"metadata": {"name": "q"}}).hard == {}


def test_a_quota_whose_hard_is_not_an_object_is_refused_by_field() -> None:
    with pytest.raises(ValueError, match=r"spec\.hard must be an object, got list"):
        quota_from_manifest({"metadata": {"name": "q"}, "spec": {"hard": ["x"]}})


def test_cache_keys_come_from_raw_metadata_even_when_the_object_is_broken() -> None:
    assert manifest_key(Kind.NODE, {"metadata": {"name": "gpu-1"}}) == "gpu-1"
    assert manifest_key(Kind.POD, {"metadata": {"name": "p", "namespace": "a"}, "spec": 7}) == "a/p"
    assert manifest_key(Kind.POD, {"metadata": "garbage"}) == "default/"
