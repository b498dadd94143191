from vgpu.adapters.kubelet import convert
from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.domain.allocation import Mount
from vgpu.ports.kubelet import (
    ContainerResponse,
    DeviceNode,
    PluginDevice,
    PluginOptions,
    PreferredRequest,
)


def test_devices_carry_health_words_and_topology_only_when_known() -> None:
    message = convert.device_list_message(
        [PluginDevice("GPU-a-0", healthy=True), PluginDevice("GPU-a-1", healthy=False, numa=1)]
    )
    wire = pb.ListAndWatchResponse.FromString(message.SerializeToString())

    assert [(d.ID, d.health) for d in wire.devices] == [
        ("GPU-a-0", "Healthy"),
        ("GPU-a-1", "Unhealthy"),
    ]
    assert not wire.devices[0].HasField("topology")
    assert [n.ID for n in wire.devices[1].topology.nodes] == [1]


def test_allocate_answers_keep_envs_mounts_in_order_and_devices() -> None:
    answer = ContainerResponse(
        envs={"NVIDIA_VISIBLE_DEVICES": "GPU-a", "CUDA_DEVICE_SM_LIMIT": "30"},
        mounts=[
            Mount("/usr/local/vgpu/libvgpu.so", "/host/libvgpu.so", True),
            Mount("/a", "/b", False),
        ],
        devices=[DeviceNode("/dev/nvidia0", "/dev/nvidia0", "rw")],
        annotations={"k": "v"},
    )

    wire = pb.AllocateResponse.FromString(convert.allocate_message([answer]).SerializeToString())

    (container,) = wire.container_responses
    assert dict(container.envs) == {"NVIDIA_VISIBLE_DEVICES": "GPU-a", "CUDA_DEVICE_SM_LIMIT": "30"}
    assert [(m.container_path, m.host_path, m.read_only) for m in container.mounts] == [
        ("/usr/local/vgpu/libvgpu.so", "/host/libvgpu.so", True),
        ("/a", "/b", False),
    ]
    assert [(d.container_path, d.permissions) for d in container.devices] == [
        ("/dev/nvidia0", "rw")
    ]
    assert dict(container.annotations) == {"k": "v"}


def test_requests_become_plain_lists() -> None:
    allocate = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=["a-0", "b-1"])]
    )
    preferred = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=["a-0", "a-1"],
                must_include_deviceIDs=["a-1"],
                allocation_size=1,
            )
        ]
    )

    assert convert.allocate_requests(allocate) == [["a-0", "b-1"]]
    assert convert.preferred_requests(preferred) == [PreferredRequest(["a-0", "a-1"], ["a-1"], 1)]
    assert list(convert.preferred_message([["a-1"]]).container_responses[0].deviceIDs) == ["a-1"]


def test_options_map_field_for_field() -> None:
    message = convert.options_message(PluginOptions(True, False))
    assert (message.pre_start_required, message.get_preferred_allocation_available) == (True, False)
