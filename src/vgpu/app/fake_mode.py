"""`--fake-cluster FILE`: run a real process (the scheduler, the device plugin, the monitor,
`vgpu explain`) on an in-memory cluster described in YAML or JSON.

The file (every section optional)::

    nodes:
      - name: node-a
        gpus:                       # written as the node's register annotation
          - uuid: GPU-03f69c50-207a-2038-9b45-23cac89cb67d
            type: NVIDIA A40
            memory: 46068           # MiB
            count: 10               # split count (default 10)
            cores: 100              # default 100
            numa: 0
            healthy: true
        annotations:                # any other node annotation, e.g. hami.io/device-cordon
          hami.io/device-cordon: ""
        allocatable: {cpu: "96", memory: 384Gi}   # status.allocatable (FGD weighs the CPU)
    pods:                           # Kubernetes Pod manifests, as `kubectl get pod -o yaml` shows
      - metadata: {name: running, namespace: default, annotations: {...}}
        spec: {nodeName: node-a, containers: [...]}
        status: {phase: Running}
    quotas:
      - namespace: team-a
        name: gpu-quota
        hard: {limits.nvidia.com/gpumem: "20000", limits.nvidia.com/gpucores: "200"}
    resourceSlices: [...]           # DRA objects (resource.k8s.io/v1), as the API shows them;
    resourceClaims: [...]           # also resourceClaimTemplates and deviceClasses

In this mode the scheduler also plays the API server's part for pods: a pod named in a filter
request that the file does not list is created (pending) so that its annotations can be written
and it can be bound (`PodRecorder`). A listed pod without `metadata.uid` gets one made from its
namespace and name. The file describes a trusted cluster, so the grants its pods carry are
signed with the process's own (random) key ring when signing is on (`fake_grant_keys`).
"""

import itertools
import uuid
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.adapters.fake.dra import FakeDraApi
from vgpu.adapters.fake.keys import FakeGrantKeys
from vgpu.app.errors import ConfigError, listed_problems
from vgpu.app.key_ring import new_key_ring
from vgpu.app.mapping_file import read_mapping_streaming
from vgpu.domain import (
    ClusterNode,
    Device,
    DomainError,
    Pod,
    Vendor,
    encode_node_devices,
    pod_from_manifest,
)
from vgpu.domain.host import node_allocatable
from vgpu.domain.trust import GRANT_SIGNATURE_ANNOTATION, KeyRing, grant_claim
from vgpu.ports.cluster import ClusterPort, Quota


class FakeClusterError(ValueError):
    """The fake cluster file cannot be used; the message names the entry and field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuEntry(_Model):
    uuid: str = Field(min_length=1, pattern=r"^[^,:;]+$")
    type: str = Field(min_length=1, pattern=r"^[^,:;]+$")
    memory: int = Field(gt=0, le=2**31 - 1)
    count: int = Field(10, gt=0, le=2**31 - 1)
    cores: int = Field(100, ge=0, le=2**31 - 1)
    numa: int = Field(0, ge=0)
    index: int | None = Field(None, ge=0)
    healthy: bool = True
    mode: str = "hami-core"


class NodeEntry(_Model):
    name: str = Field(min_length=1)
    gpus: list[GpuEntry] = []
    annotations: dict[str, str] = {}
    allocatable: dict[str, str | int] = {}  # Kubernetes quantities, as in status.allocatable


class QuotaEntry(_Model):
    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)
    hard: dict[str, str | int] = {}


class FakeClusterFile(_Model):
    nodes: list[NodeEntry] = []
    pods: list[dict[str, Any]] = []
    quotas: list[QuotaEntry] = []
    # DRA objects (resource.k8s.io/v1) as `kubectl get -o yaml` shows them; read by the
    # processes that use DRA (vgpu explain, vgpu dra-driver), checked field by field when
    # they are read
    resourceClaims: list[dict[str, Any]] = []
    resourceClaimTemplates: list[dict[str, Any]] = []
    resourceSlices: list[dict[str, Any]] = []
    deviceClasses: list[dict[str, Any]] = []


def load_fake_cluster(path: Path, vendor: Vendor) -> FakeCluster:
    """A FakeCluster filled from the YAML or JSON file; FakeClusterError names entry and field."""
    spec, manifests = _read(path)
    return build_fake_cluster(spec, vendor, str(path), manifests)


def load_fake_dra(path: Path, with_pods: bool = False) -> FakeDraApi:
    """The DRA objects the file lists (its `resourceClaims`, `resourceClaimTemplates`,
    `resourceSlices` and `deviceClasses`), and its `pods` as JSON when `with_pods` (the DRA
    driver reads the pods a claim is reserved for); FakeClusterError names the entry and
    field."""
    spec, manifests = _read(path)
    pods = [m for m in manifests if isinstance(m, dict)] if with_pods else ()
    return FakeDraApi(
        spec.resourceClaims,
        spec.resourceClaimTemplates,
        spec.resourceSlices,
        spec.deviceClasses,
        pods,
    )


def _read(path: Path) -> tuple[FakeClusterFile, Iterable[Any]]:
    what = "fake cluster file"
    try:
        # the pods skip the model: each manifest is decoded, read into a Pod and let go, so a
        # large cluster is never held as manifests and pods together (the process's RSS keeps
        # what its peak took)
        raw, manifests = read_mapping_streaming(path, what, "pods")
        return FakeClusterFile.model_validate(raw), manifests
    except ConfigError as exc:
        raise FakeClusterError(str(exc)) from None
    except ValidationError as exc:
        raise FakeClusterError(listed_problems(exc, f"{what} {path}")) from None


def build_fake_cluster(
    spec: FakeClusterFile, vendor: Vendor, where: str = "", manifests: Iterable[Any] = ()
) -> FakeCluster:
    """The cluster the spec describes, with the pods in `spec.pods` and then in `manifests`."""
    cluster = FakeCluster()
    for position, entry in enumerate(spec.nodes):
        annotations = dict(entry.annotations)
        if entry.gpus:
            if vendor.register_annotation in annotations:
                raise FakeClusterError(
                    f"{where}: nodes[{position}]: give either gpus or the "
                    f"{vendor.register_annotation} annotation, not both"
                )
            annotations[vendor.register_annotation] = encode_node_devices(
                [_device(g, i) for i, g in enumerate(entry.gpus)]
            )
        try:
            node_allocatable(entry.allocatable)
        except DomainError as exc:
            raise FakeClusterError(f"{where}: nodes[{position}]: {exc}") from None
        allocatable = {k: str(v) for k, v in entry.allocatable.items()}
        cluster.put_node(ClusterNode(entry.name, annotations, allocatable))
    for entry_quota in spec.quotas:
        cluster.put_quota(Quota(entry_quota.namespace, entry_quota.name, entry_quota.hard))
    for position, manifest in enumerate(itertools.chain(spec.pods, manifests)):
        if not isinstance(manifest, dict):
            raise FakeClusterError(f"{where}: pods[{position}]: must be a pod manifest (a mapping)")
        try:
            pod = pod_from_manifest(manifest)
        except DomainError as exc:
            raise FakeClusterError(f"{where}: pods[{position}]: {exc}") from None
        if not pod.name:
            raise FakeClusterError(f"{where}: pods[{position}]: metadata.name is missing")
        if not pod.uid:  # as the API server gives one; the same for the same pod, run after run
            made = uuid.uuid5(uuid.NAMESPACE_URL, f"{pod.namespace}/{pod.name}")
            pod = replace(pod, uid=str(made))
        cluster.put_pod(pod)
    return cluster


def fake_grant_keys(cluster: ClusterPort, vendor: Vendor) -> FakeGrantKeys:
    """A fresh key ring in memory that has signed the grants the file's pods carry: the file
    describes a trusted cluster."""
    ring = new_key_ring(datetime.now(UTC))
    sign_listed_grants(cluster, ring, vendor)
    return FakeGrantKeys(ring)


def sign_listed_grants(cluster: ClusterPort, ring: KeyRing, vendor: Vendor) -> None:
    """Sign every grant the file's pods carry, as if this process's scheduler had written them."""
    for pod in cluster.list_pods():
        claim = grant_claim(pod.uid, pod.annotations, vendor)
        if claim is not None:
            signature = ring.sign(claim)
            cluster.patch_pod_annotations(
                pod.namespace, pod.name, {GRANT_SIGNATURE_ANNOTATION: signature}
            )


def _device(gpu: GpuEntry, position: int) -> Device:
    return Device(
        uuid=gpu.uuid,
        index=position if gpu.index is None else gpu.index,
        type=gpu.type,
        count=gpu.count,
        memory=gpu.memory,
        cores=gpu.cores,
        numa=gpu.numa,
        healthy=gpu.healthy,
        mode=gpu.mode,
    )


class PodRecorder:
    """Plays the API server's part: pods the scheduler is asked about exist in the fake."""

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster

    def __call__(self, pod: Pod) -> None:
        if self._cluster.get_pod(pod.namespace, pod.name) is None:
            self._cluster.put_pod(pod)
