"""A pod manifest whose parts have the wrong JSON type is a DomainError naming the part."""

import pytest

from vgpu.domain import DomainError, pod_from_manifest


@pytest.mark.parametrize(
    ("patch", "says"),
    [
        ({"metadata": {"annotations": ["a"]}}, "pod annotations must be an object"),
        ({"metadata": {"labels": "x"}}, "pod labels must be an object"),
        ({"spec": {"containers": 5}}, "pod containers must be a list"),
        ({"spec": {"containers": {"name": "c"}}}, "pod containers must be a list"),
        ({"spec": {"initContainers": 1.5}}, "pod initContainers must be a list"),
        ({"spec": {"containers": [{"name": "c", "env": 5}]}}, "pod container env must be a list"),
    ],
)
def test_wrong_types_are_domain_errors(patch: dict[str, object], says: str) -> None:
    manifest = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    for key, value in patch.items():
        manifest[key] = {**manifest.get(key, {}), **value}  # type: ignore[dict-item]
    with pytest.raises(DomainError, match=says):
        pod_from_manifest(manifest)


def test_empty_parts_still_read_as_absent() -> None:
    pod = pod_from_manifest(
        {"metadata": {"name": "p", "annotations": None, "labels": {}}, "spec": {"containers": []}}
    )
    assert pod.annotations == {} and pod.containers == ()
