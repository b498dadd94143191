"""The kubelet's DRA services over gRPC, each delegating to a DraPluginHandler.

`DRAPlugin` is served twice, as `v1` and `v1beta1` (the same messages; v1beta1 has no share id),
so a kubelet of either version finds the one it speaks. A handler exception fails the whole call
with INTERNAL and a logged traceback, as the kubelet then retries it; per-claim failures travel
in each claim's `error`.
"""

import logging
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any, NoReturn, TypeVar

import grpc

from vgpu.adapters.kubelet_dra.generated import dra_health_v1alpha1_pb2 as health_pb
from vgpu.adapters.kubelet_dra.generated import dra_health_v1alpha1_pb2_grpc as health_grpc
from vgpu.adapters.kubelet_dra.generated import dra_v1_pb2 as v1_pb
from vgpu.adapters.kubelet_dra.generated import dra_v1_pb2_grpc as v1_grpc
from vgpu.adapters.kubelet_dra.generated import dra_v1beta1_pb2 as v1beta1_pb
from vgpu.adapters.kubelet_dra.generated import dra_v1beta1_pb2_grpc as v1beta1_grpc
from vgpu.adapters.kubelet_dra.generated import pluginregistration_v1_pb2 as reg_pb
from vgpu.adapters.kubelet_dra.generated import pluginregistration_v1_pb2_grpc as reg_grpc
from vgpu.ports.dra import (
    ClaimOutcome,
    ClaimRef,
    DeviceHealthReport,
    DraPluginHandler,
    RegistrationStatus,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

PLUGIN_TYPE = "DRAPlugin"
V1_SERVICE = "v1.DRAPlugin"
V1BETA1_SERVICE = "v1beta1.DRAPlugin"
HEALTH_SERVICE = "v1alpha1.DRAResourceHealth"
SUPPORTED_VERSIONS = (V1_SERVICE, V1BETA1_SERVICE, HEALTH_SERVICE)


def claim_refs(request: Any) -> list[ClaimRef]:
    return [ClaimRef(c.namespace, c.name, c.uid) for c in request.claims]


def prepare_response(pb: ModuleType, outcomes: Mapping[str, ClaimOutcome]) -> Any:
    """`NodePrepareResourcesResponse` of the API module `pb` (v1 carries the share ids)."""
    response = pb.NodePrepareResourcesResponse()
    with_share = "share_id" in pb.Device.DESCRIPTOR.fields_by_name
    for uid, outcome in outcomes.items():
        answer = response.claims[uid]
        if outcome.error:
            answer.error = outcome.error
            continue
        for device in outcome.devices:
            entry = answer.devices.add(
                request_names=list(device.requests),
                pool_name=device.pool,
                device_name=device.device,
                cdi_device_ids=list(device.cdi_ids),
            )
            if with_share and device.share_id is not None:
                entry.share_id = device.share_id
    return response


def unprepare_response(pb: ModuleType, errors: Mapping[str, str]) -> Any:
    response = pb.NodeUnprepareResourcesResponse()
    for uid, error in errors.items():
        response.claims[uid].error = error
    return response


def health_message(reports: list[DeviceHealthReport]) -> Any:
    response = health_pb.NodeWatchResourcesResponse()
    for report in reports:
        status = (
            health_pb.UNKNOWN
            if report.healthy is None
            else health_pb.HEALTHY
            if report.healthy
            else health_pb.UNHEALTHY
        )
        response.devices.add(
            device=health_pb.DeviceIdentifier(pool_name=report.pool, device_name=report.device),
            health=status,
            last_updated_time=report.updated_at,
            health_check_timeout_seconds=report.timeout_s,
            message=report.message,
        )
    return response


class _DraPlugin:
    """`DRAPlugin` of one API version (`pb` is its message module)."""

    def __init__(self, handler: DraPluginHandler, pb: ModuleType) -> None:
        self._handler = handler
        self._pb = pb

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        claims = claim_refs(request)
        return _guard(
            context,
            "NodePrepareResources",
            lambda: prepare_response(self._pb, self._handler.prepare(claims)),
        )

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        claims = claim_refs(request)
        return _guard(
            context,
            "NodeUnprepareResources",
            lambda: unprepare_response(self._pb, self._handler.unprepare(claims)),
        )


class DraPluginV1(_DraPlugin, v1_grpc.DRAPluginServicer):
    def __init__(self, handler: DraPluginHandler) -> None:
        super().__init__(handler, v1_pb)


class DraPluginV1beta1(_DraPlugin, v1beta1_grpc.DRAPluginServicer):
    def __init__(self, handler: DraPluginHandler) -> None:
        super().__init__(handler, v1beta1_pb)


class DraHealth(health_grpc.DRAResourceHealthServicer):
    def __init__(self, handler: DraPluginHandler) -> None:
        self._handler = handler

    def NodeWatchResources(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        log.info("kubelet opened NodeWatchResources")
        try:
            for reports in self._handler.watch_health(context.is_active):
                yield health_message(reports)
        except Exception as exc:  # an edge: report, never end the stream with a traceback
            log.exception("NodeWatchResources failed")
            _abort(context, grpc.StatusCode.INTERNAL, f"NodeWatchResources failed: {exc}")
        log.info("NodeWatchResources stream ended")


class Registration(reg_grpc.RegistrationServicer):
    """`pluginregistration.Registration`: what the kubelet's plugin watcher asks first."""

    def __init__(self, handler: DraPluginHandler, driver: str, endpoint: str) -> None:
        self._handler = handler
        self._driver = driver
        self._endpoint = endpoint

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return reg_pb.PluginInfo(
            type=PLUGIN_TYPE,
            name=self._driver,
            endpoint=self._endpoint,
            supported_versions=list(SUPPORTED_VERSIONS),
        )

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        status = RegistrationStatus(bool(request.plugin_registered), str(request.error))
        _guard(context, "NotifyRegistrationStatus", lambda: self._handler.registration(status))
        return reg_pb.RegistrationStatusResponse()


def _guard(context: grpc.ServicerContext, name: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except Exception as exc:
        log.exception("%s failed unexpectedly", name)
        _abort(context, grpc.StatusCode.INTERNAL, f"{name} failed: {exc}")


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("grpc context.abort returned")  # abort always raises
