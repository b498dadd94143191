from collections.abc import Callable, Iterator, Sequence
from typing import Any

import grpc
import pytest

from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.adapters.kubelet.servicer import DevicePluginServicer
from vgpu.ports.kubelet import (
    ContainerResponse,
    DevicePluginError,
    PluginDevice,
    PluginOptions,
    PreferredRequest,
)


class Aborted(Exception):
    pass


class FakeContext:
    """The part of grpc.ServicerContext the servicer uses."""

    def __init__(self, active: int = 10) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""
        self._active = active

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise Aborted(details)

    def is_active(self) -> bool:
        self._active -= 1
        return self._active >= 0


class Handler:
    def __init__(self, allocate_error: Exception | None = None) -> None:
        self.allocate_error = allocate_error
        self.pre_started: list[list[str]] = []

    def options(self) -> PluginOptions:
        return PluginOptions(get_preferred_allocation_available=True)

    def watch_devices(self, active: Callable[[], bool]) -> Iterator[list[PluginDevice]]:
        while active():
            yield [PluginDevice("GPU-a-0")]

    def preferred_allocation(self, requests: Sequence[PreferredRequest]) -> list[list[str]]:
        return [list(r.available[:1]) for r in requests]

    def allocate(self, requests: Sequence[Sequence[str]]) -> list[ContainerResponse]:
        if self.allocate_error is not None:
            raise self.allocate_error
        return [ContainerResponse(envs={"N": str(len(r))}) for r in requests]

    def pre_start(self, device_ids: Sequence[str]) -> None:
        self.pre_started.append(list(device_ids))


def _allocate(handler: Handler, context: FakeContext) -> Any:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=["a"])]
    )
    return DevicePluginServicer(handler).Allocate(request, context)


def test_allocate_answers_through_the_handler() -> None:
    reply = _allocate(Handler(), FakeContext())
    assert dict(reply.container_responses[0].envs) == {"N": "1"}


def test_a_refusal_becomes_failed_precondition_with_the_handlers_sentence() -> None:
    context = FakeContext()
    with pytest.raises(Aborted):
        _allocate(Handler(DevicePluginError("card GPU-x is not on this node")), context)
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION
    assert context.details == "card GPU-x is not on this node"


def test_a_surprise_becomes_internal_naming_the_call() -> None:
    context = FakeContext()
    with pytest.raises(Aborted):
        _allocate(Handler(KeyError("boom")), context)
    assert context.code == grpc.StatusCode.INTERNAL
    assert context.details.startswith("Allocate failed:") and "boom" in context.details


def test_list_and_watch_streams_while_the_call_is_active() -> None:
    servicer = DevicePluginServicer(Handler())
    replies = list(servicer.ListAndWatch(pb.Empty(), FakeContext(active=2)))
    assert [[d.ID for d in r.devices] for r in replies] == [["GPU-a-0"], ["GPU-a-0"]]


def test_options_preferred_and_pre_start_are_delegated() -> None:
    handler = Handler()
    servicer = DevicePluginServicer(handler)
    context = FakeContext()

    options = servicer.GetDevicePluginOptions(pb.Empty(), context)
    preferred = servicer.GetPreferredAllocation(
        pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(available_deviceIDs=["x", "y"])
            ]
        ),
        context,
    )
    servicer.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["x"]), context)

    assert options.get_preferred_allocation_available and not options.pre_start_required
    assert list(preferred.container_responses[0].deviceIDs) == ["x"]
    assert handler.pre_started == [["x"]]
