"""A stand-in for HAMi's device plugin, to put pods HAMi served into the kubelet's checkpoint.

It registers `nvidia.com/gpu` with the kubelet, lists `split` replicas of each card, and answers
Allocate the way HAMi's plugin does for the pod HAMi's scheduler placed on its node: the pod on
the node whose `hami.io/bind-phase` is `allocating`, the first container grant left in its
`hami.io/vgpu-devices-to-allocate` (taken off the annotation), and the card and its limits in
the environment HAMi-core reads. Once no grant is left, the pod's bind phase becomes `success`
and the node lock is released. Enough of HAMi's protocol for the kubelet to record what it
served; none of HAMi's checks.
"""

import threading
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from tests.e2e.k8s_emulator import RunningApiServer
from vgpu.adapters.kubelet.generated import api_pb2 as pb
from vgpu.adapters.kubelet.generated import api_pb2_grpc as pb_grpc
from vgpu.domain import decode_pod_grants
from vgpu.domain.vendor import NODE_LOCK_ANNOTATION, NVIDIA

ENDPOINT = "hami-nvidia.sock"
BIND_PHASE = "hami.io/bind-phase"


class HamiPlugin(pb_grpc.DevicePluginServicer):  # type: ignore[misc]
    def __init__(
        self, api: RunningApiServer, node: str, plugin_dir: Path, cards: Sequence[str], split: int
    ) -> None:
        self._api = api
        self._node = node
        self._socket = plugin_dir / ENDPOINT
        self._devices = [f"{card}-{i}" for card in cards for i in range(split)]
        self._server: grpc.Server | None = None
        self._stopped = threading.Event()

    def start(self) -> "HamiPlugin":
        """Serve on its socket and register with the kubelet there."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self._socket}")
        server.start()
        self._server = server
        with grpc.insecure_channel(f"unix://{self._socket.parent / 'kubelet.sock'}") as channel:
            pb_grpc.RegistrationStub(channel).Register(
                pb.RegisterRequest(
                    version="v1beta1", endpoint=ENDPOINT, resource_name=NVIDIA.count_resource
                ),
                timeout=10,
            )
        return self

    def stop(self) -> None:
        """HAMi's plugin leaves the node (its DaemonSet no longer selects it)."""
        self._stopped.set()
        if self._server is not None:
            self._server.stop(grace=0).wait()
            self._server = None
        self._socket.unlink(missing_ok=True)

    # v1beta1.DevicePlugin ---------------------------------------------------------------------
    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        return pb.DevicePluginOptions()

    def ListAndWatch(self, request: Any, context: Any) -> Any:
        yield pb.ListAndWatchResponse(
            devices=[pb.Device(ID=device, health="Healthy") for device in self._devices]
        )
        while context.is_active() and not self._stopped.wait(0.2):
            pass  # the devices never change

    def Allocate(self, request: Any, context: Any) -> Any:
        answers = [self._serve_next(context) for _ in request.container_requests]
        return pb.AllocateResponse(container_responses=answers)

    def _serve_next(self, context: Any) -> Any:
        pod = self._allocating()
        if pod is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no pod is allocating on {self._node}")
        meta = pod["metadata"]
        segments = meta["annotations"][NVIDIA.to_allocate_annotation].split(";")
        index = next(i for i, segment in enumerate(segments) if segment)
        (grants,) = decode_pod_grants(segments[index] + ";")
        segments[index] = ""
        left = ";".join(segments)
        notes = {NVIDIA.to_allocate_annotation: left}
        if not any(left.split(";")):
            notes[BIND_PHASE] = "success"
            self._api.merge_patch(
                f"/api/v1/nodes/{self._node}",
                {"metadata": {"annotations": {NODE_LOCK_ANNOTATION: None}}},
            )
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        self._api.merge_patch(path, {"metadata": {"annotations": notes}})
        envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(g.uuid for g in grants)}
        for i, grant in enumerate(grants):
            envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = f"{grant.memory}m"
        envs["CUDA_DEVICE_SM_LIMIT"] = str(grants[0].cores)
        return pb.ContainerAllocateResponse(envs=envs)

    def _allocating(self) -> dict[str, Any] | None:
        for pod in self._api.list_items("/api/v1/pods"):
            annotations = pod["metadata"].get("annotations") or {}
            if pod["spec"].get("nodeName") == self._node and annotations.get(BIND_PHASE) == (
                "allocating"
            ):
                return pod
        return None
