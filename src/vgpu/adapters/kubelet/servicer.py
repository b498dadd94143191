"""`v1beta1.DevicePlugin` over gRPC, delegating every call to a DevicePluginHandler."""

import logging
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import grpc

from vgpu.adapters.kubelet import convert
from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.adapters.kubelet.generated import api_pb2_grpc as pb_grpc
from vgpu.ports.kubelet import DevicePluginError, DevicePluginHandler

log = logging.getLogger(__name__)
T = TypeVar("T")


class DevicePluginServicer(pb_grpc.DevicePluginServicer):
    """Turns protobuf requests into handler calls and handler errors into gRPC statuses.

    A refusal (DevicePluginError) becomes FAILED_PRECONDITION with the handler's sentence;
    anything unexpected becomes INTERNAL and is logged with its traceback, so no call ever
    ends with a bare server error.
    """

    def __init__(self, handler: DevicePluginHandler) -> None:
        self._handler = handler

    def GetDevicePluginOptions(self, request: Any, context: grpc.ServicerContext) -> Any:
        return _guard(
            context,
            "GetDevicePluginOptions",
            lambda: convert.options_message(self._handler.options()),
        )

    def ListAndWatch(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        log.info("kubelet opened ListAndWatch")
        try:
            for devices in self._handler.watch_devices(context.is_active):
                yield convert.device_list_message(devices)
        except Exception as exc:  # an edge: report, never crash the stream with a traceback
            log.exception("ListAndWatch failed")
            _abort(context, grpc.StatusCode.INTERNAL, f"ListAndWatch failed: {exc}")
        log.info("ListAndWatch stream ended")

    def GetPreferredAllocation(self, request: Any, context: grpc.ServicerContext) -> Any:
        requests = convert.preferred_requests(request)
        return _guard(
            context,
            "GetPreferredAllocation",
            lambda: convert.preferred_message(self._handler.preferred_allocation(requests)),
        )

    def Allocate(self, request: Any, context: grpc.ServicerContext) -> Any:
        requests = convert.allocate_requests(request)
        return _guard(
            context, "Allocate", lambda: convert.allocate_message(self._handler.allocate(requests))
        )

    def PreStartContainer(self, request: Any, context: grpc.ServicerContext) -> Any:
        device_ids = list(request.devices_ids)

        def call() -> Any:
            self._handler.pre_start(device_ids)
            return pb.PreStartContainerResponse()

        return _guard(context, "PreStartContainer", call)


def _guard(context: grpc.ServicerContext, name: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except DevicePluginError as exc:
        _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc))
    except Exception as exc:
        log.exception("%s failed unexpectedly", name)
        _abort(context, grpc.StatusCode.INTERNAL, f"{name} failed: {exc}")


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("grpc context.abort returned")  # abort always raises
