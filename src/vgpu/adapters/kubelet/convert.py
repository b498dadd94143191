"""Between the port's dataclasses and the v1beta1 protobuf messages."""

from collections.abc import Sequence

from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.ports.kubelet import (
    HEALTHY,
    UNHEALTHY,
    ContainerResponse,
    PluginDevice,
    PluginOptions,
    PreferredRequest,
)


def options_message(options: PluginOptions) -> pb.DevicePluginOptions:
    return pb.DevicePluginOptions(
        pre_start_required=options.pre_start_required,
        get_preferred_allocation_available=options.get_preferred_allocation_available,
    )


def device_list_message(devices: Sequence[PluginDevice]) -> pb.ListAndWatchResponse:
    return pb.ListAndWatchResponse(devices=[_device_message(d) for d in devices])


def _device_message(device: PluginDevice) -> pb.Device:
    message = pb.Device(ID=device.id, health=HEALTHY if device.healthy else UNHEALTHY)
    if device.numa is not None:
        message.topology.nodes.append(pb.NUMANode(ID=device.numa))
    return message


def preferred_requests(message: pb.PreferredAllocationRequest) -> list[PreferredRequest]:
    return [
        PreferredRequest(
            available=list(c.available_deviceIDs),
            must_include=list(c.must_include_deviceIDs),
            size=c.allocation_size,
        )
        for c in message.container_requests
    ]


def preferred_message(choices: Sequence[Sequence[str]]) -> pb.PreferredAllocationResponse:
    return pb.PreferredAllocationResponse(
        container_responses=[
            pb.ContainerPreferredAllocationResponse(deviceIDs=list(ids)) for ids in choices
        ]
    )


def allocate_requests(message: pb.AllocateRequest) -> list[list[str]]:
    return [list(c.devices_ids) for c in message.container_requests]


def allocate_message(answers: Sequence[ContainerResponse]) -> pb.AllocateResponse:
    return pb.AllocateResponse(container_responses=[_container_message(a) for a in answers])


def _container_message(answer: ContainerResponse) -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(
        envs=dict(answer.envs),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in answer.mounts
        ],
        devices=[
            pb.DeviceSpec(
                container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
            )
            for d in answer.devices
        ],
        annotations=dict(answer.annotations),
    )
