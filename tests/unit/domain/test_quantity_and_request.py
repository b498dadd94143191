import pytest

from tests.unit.domain.builders import container, pod
from vgpu.domain import ContainerRequest, RequestDefaults, RequestError, Vendor, parse_request
from vgpu.domain.quantity import memory_mib

NVIDIA = Vendor()


def request_of(**limits: object) -> ContainerRequest | None:
    return parse_request(pod(container(**limits)).containers[0], NVIDIA)


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("20Gi", 20480),
        ("512Mi", 512),
        ("1500", 1500),
        (3000, 3000),
        ("1.5Gi", 1536),
        ("1Ti", 1 << 20),
    ],
)
def test_memory_accepts_plain_mib_and_kubernetes_quantities(text: str | int, mib: int) -> None:
    assert memory_mib(text) == mib


def test_seed_a40_request() -> None:
    assert request_of(gpu=1, mem=20000, cores=80) == ContainerRequest(
        count=1, memory=20000, memory_percent=0, cores=80
    )


def test_gpumem_as_quantity_is_converted_to_mib() -> None:
    request = request_of(gpu=2, mem="20Gi")
    assert request is not None and request.memory == 20480 and request.count == 2


def test_no_gpu_resources_means_no_request() -> None:
    assert request_of() is None
    assert request_of(cpu="1") is None
    assert request_of(gpu=0) is None


def test_memory_or_cores_alone_get_the_default_gpu_count() -> None:
    request = parse_request(
        pod(container(mem=1000)).containers[0], NVIDIA, RequestDefaults(gpu_count=2)
    )
    assert request is not None and request.count == 2


def test_neither_memory_field_means_the_whole_card() -> None:
    request = request_of(gpu=1)
    assert request is not None and request.memory == 0 and request.memory_percent == 100


def test_default_memory_applies_when_configured() -> None:
    request = parse_request(
        pod(container(gpu=1)).containers[0], NVIDIA, RequestDefaults(memory=4096)
    )
    assert request is not None and (request.memory, request.memory_percent) == (4096, 0)


def test_percentage_request() -> None:
    request = request_of(gpu=1, pct=25)
    assert request is not None and (request.memory, request.memory_percent) == (0, 25)


def test_memory_factor_multiplies_gpumem() -> None:
    request = parse_request(
        pod(container(gpu=1, mem=100)).containers[0], NVIDIA, RequestDefaults(memory_factor=10)
    )
    assert request is not None and request.memory == 1000


def test_limits_win_over_requests() -> None:
    raw = container(gpu=1, mem=2000)
    raw["resources"]["requests"] = {"nvidia.com/gpumem": "1000"}
    request = parse_request(pod(raw).containers[0], NVIDIA)
    assert request is not None and request.memory == 2000


def test_requests_alone_are_read() -> None:
    raw = {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    request = parse_request(pod(raw).containers[0], NVIDIA)
    assert request is not None and request.count == 1


def test_resource_names_are_configurable() -> None:
    vendor = Vendor(count_resource="example.com/vgpu", memory_resource="example.com/vmem")
    raw = {"name": "c", "resources": {"limits": {"example.com/vgpu": 1, "example.com/vmem": 300}}}
    request = parse_request(pod(raw).containers[0], vendor)
    assert request is not None and (request.count, request.memory) == (1, 300)


def test_priority_is_kept() -> None:
    request = request_of(gpu=1, priority=0)
    assert request is not None and request.priority == 0


@pytest.mark.parametrize(
    ("limits", "resource", "words"),
    [
        ({"gpu": -1}, "nvidia.com/gpu", "between"),
        ({"gpu": "two"}, "nvidia.com/gpu", "not a Kubernetes quantity"),
        ({"gpu": "1.5"}, "nvidia.com/gpu", "whole number"),
        ({"gpu": 1, "mem": -5}, "nvidia.com/gpumem", "negative"),
        ({"gpu": 1, "mem": "1500.5"}, "nvidia.com/gpumem", "whole number of MiB"),
        ({"gpu": 1, "mem": "1000Ki"}, "nvidia.com/gpumem", "whole number of MiB"),
        ({"gpu": 1, "mem": "99Ei"}, "nvidia.com/gpumem", "above the limit"),
        ({"gpu": 1, "pct": 101}, "nvidia.com/gpumem-percentage", "between 0 and 100"),
        ({"gpu": 1, "cores": 150}, "nvidia.com/gpucores", "between 0 and 100"),
        ({"gpu": 1, "cores": "abc"}, "nvidia.com/gpucores", "not a Kubernetes quantity"),
        ({"gpu": 1, "priority": -1}, "nvidia.com/priority", "between"),
    ],
)
def test_bad_values_name_the_container_resource_and_value(
    limits: dict[str, object], resource: str, words: str
) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request(pod(container("trainer", **limits)).containers[0], NVIDIA)
    message = str(caught.value)
    assert "trainer" in message and resource in message and words in message
    assert caught.value.resource == resource
