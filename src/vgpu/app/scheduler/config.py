"""The scheduler's settings: one pydantic model, read from a YAML file and `VGPU_*` variables.

Precedence, lowest first: defaults, the `--config` file, environment variables, command-line
flags. A nested field is set from the environment with `__` between levels, e.g.
`VGPU_LEADER_ELECTION__ENABLED=true` or `VGPU_DEFAULTS__MEMORY=1024`. Unknown `VGPU_*` names
are logged and ignored. The loading itself is `vgpu.app.settings`, shared with the device plugin.
"""

import ipaddress
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from vgpu.app.errors import ConfigError
from vgpu.app.scheduler.certs import WebhookCertsConfig
from vgpu.app.secure_metrics import SecureMetrics
from vgpu.app.settings import (
    DeviceClassName,
    DraDriverName,
    ResourceName,
    Takeover,
    VendorWord,
    load_settings,
)
from vgpu.domain import (
    AdmissionConfig,
    PodPolicies,
    Policy,
    PolicyError,
    RequestDefaults,
    SchedulingConfig,
    Vendor,
    pod_policies,
)
from vgpu.domain.dra import DEFAULT_DRIVER, DraAdmissionConfig
from vgpu.domain.fragmentation.card_balanced import CardCounts
from vgpu.domain.fragmentation.cards import CardWorkload
from vgpu.domain.handshake import HamiVersion
from vgpu.domain.host import mebibytes, milli_cores
from vgpu.domain.vendor import GPU_POLICY_ANNOTATION

__all__ = [
    "ConfigError",
    "Defaults",
    "DraWebhook",
    "ExplainListener",
    "ExtenderListener",
    "Fragmentation",
    "LeaderElection",
    "MetricsListener",
    "ResourceNames",
    "SchedulerConfig",
    "SeedShape",
    "Signing",
    "TypicalShape",
    "load_config",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _milli_cores(value: object) -> int:
    try:
        return milli_cores(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} {exc}") from None


CpuQuantity = Annotated[int, BeforeValidator(_milli_cores)]  # `3152m`, `4`: in milli-cores


def _mebibytes(value: object) -> int:
    try:
        return mebibytes(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} {exc}") from None


MemoryQuantity = Annotated[int, BeforeValidator(_mebibytes)]  # `16Gi`, `3152Mi`: in MiB


class ResourceNames(_Model):
    """Extended resource names pods use, and the vendor word written into grants."""

    count: ResourceName = "nvidia.com/gpu"
    memory: ResourceName = "nvidia.com/gpumem"
    memory_percentage: ResourceName = "nvidia.com/gpumem-percentage"
    cores: ResourceName = "nvidia.com/gpucores"
    priority: ResourceName = "nvidia.com/priority"
    vendor_word: VendorWord = "NVIDIA"


class Defaults(_Model):
    """HAMi's device-config defaults for requests that leave something out."""

    gpu_count: int = Field(default=1, ge=1, le=1 << 16)
    memory: int = Field(default=0, ge=0, le=2**31 - 1)
    cores: int = Field(default=0, ge=0, le=100)
    memory_factor: int = Field(default=1, ge=1, le=1 << 20)


class SeedShape(_Model):
    """A pod shape the cluster is known to run (one container's request and its pod's CPU and
    host memory), and how common it is relative to the other shapes."""

    gpus: int = Field(default=1, ge=1, le=64)
    memory: int = Field(default=0, ge=0, le=2**31 - 1)  # MiB per card; 0: memory_percent
    memory_percent: int = Field(default=100, ge=1, le=100)
    cores: int = Field(default=0, ge=0, le=100)
    gputype: str = ""  # card types it accepts, as nvidia.com/use-gputype
    cpu: CpuQuantity = 0  # the pod's CPU request, in milli-cores once read
    host_memory: MemoryQuantity = 0  # the pod's memory request, in MiB once read
    weight: float = Field(default=1.0, gt=0)


class TypicalShape(SeedShape):
    """A typical shape given outright; `gpus: 0` is a pod that asks for CPU only (it stands for
    the GPU every node strands for such pods, as in the paper)."""

    gpus: int = Field(default=1, ge=0, le=64)


class Fragmentation(_Model):
    """What FGD (`node_policy`/`gpu_policy` `fgd`, or a pod's annotation) measures
    fragmentation against: `typical_shapes` (or those of the pod list `typical_shapes_file`)
    when given, as in the paper; else the shapes of the last `window` GPU pods filtered (each
    once), with `seed_shapes` filling the window until that many pods have been seen, the
    commonest covering `coverage` of it, worked out again every `refresh` new pods and taken
    when their shares moved by more than `tolerance`."""

    window: int = Field(default=1000, ge=1, le=1_000_000)
    refresh: int = Field(default=100, ge=1, le=1_000_000)
    coverage: float = Field(default=0.95, gt=0, le=1)
    # shapes whose shares moved less (total variation distance) are kept: remembered answers last
    tolerance: float = Field(default=0.05, ge=0, le=1)
    seed_shapes: list[SeedShape] = Field(default_factory=list)
    typical_shapes: list[TypicalShape] = Field(default_factory=list)
    # a pod list in `vgpu simulate --trace`'s CSV format: its typical shapes, read at start
    typical_shapes_file: Path | None = None
    _from_file: list[TypicalShape] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        given = [
            name
            for name, value in (
                ("seed_shapes", self.seed_shapes),
                ("typical_shapes", self.typical_shapes),
                ("typical_shapes_file", self.typical_shapes_file),
            )
            if value
        ]
        if len(given) > 1:
            raise ValueError(
                f"give one of {' and '.join(given)}: typical shapes replace the window of recent "
                "pods that seed shapes fill"
            )
        if self.typical_shapes_file is not None:
            self._from_file = trace_shapes(self.typical_shapes_file, self.coverage)
        return self

    def given_shapes(self) -> list[TypicalShape]:
        """The typical shapes given (outright or by a pod list); empty: learn them."""
        return self.typical_shapes or self._from_file


def trace_shapes(path: Path, coverage: float) -> list[TypicalShape]:
    """The typical shapes of a pod list in `vgpu simulate --trace`'s format, as the replay works
    them out (`typical_shapes`), in HAMi's terms (`vgpu.app.simulate.trace.hami_shape`): a
    share of `m` milli asks `m / 10` percent of a card's memory and cores, whole cards all."""
    from vgpu.app.simulate.trace.files import TraceError, read_pods  # only when asked: slow
    from vgpu.app.simulate.trace.hami import hami_shape
    from vgpu.domain.fragmentation import typical_shapes

    try:
        pods = read_pods(path)
    except TraceError as exc:
        raise ValueError(f"typical_shapes_file: {exc}") from None
    found = typical_shapes([p.pod for p in pods], coverage)
    return [TypicalShape.model_validate(hami_shape(shape)) for shape in found]


class LeaderElection(_Model):
    """A coordination.k8s.io Lease so that two replicas can run; only the leader schedules."""

    enabled: bool = False
    namespace: str = "kube-system"
    lease_name: str = ""  # empty: the scheduler name
    identity: str = ""  # empty: the host name
    lease_duration: int = Field(default=15, gt=0)
    renew_deadline: float = Field(default=10.0, gt=0)
    retry_period: float = Field(default=2.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "needs retry_period < renew_deadline < lease_duration, got "
                f"{self.retry_period} < {self.renew_deadline} < {self.lease_duration}"
            )
        return self


def is_loopback(address: str) -> bool:
    """True for `localhost` and loopback IP literals; any other name may reach the network."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


class ExtenderListener(_Model):
    """Where kube-scheduler reaches the extender verbs (`/filter`, `/prioritize`, `/bind`).

    Plain HTTP only on a loopback address (kube-scheduler as a sidecar in the same pod);
    anywhere else the listener needs mutual TLS: a serving certificate and key, and the CA that
    signs the client certificate kube-scheduler presents (its extender `tlsConfig`).
    """

    address: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8888, ge=0, le=65535)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    client_ca: Path | None = None
    workers: int = Field(default=8, ge=1, le=256)  # threads that run the verbs

    @property
    def mutual_tls(self) -> bool:
        return self.tls_cert is not None

    @model_validator(mode="after")
    def _secured(self) -> Self:
        given = [self.tls_cert is not None, self.tls_key is not None, self.client_ca is not None]
        if any(given) and not all(given):
            raise ValueError(
                "extender.tls_cert, extender.tls_key and extender.client_ca go together "
                "(mutual TLS needs all three)"
            )
        if not self.mutual_tls and not is_loopback(self.address):
            raise ValueError(
                f"extender.address {self.address!r} is not a loopback address: serving the "
                "extender verbs there needs mutual TLS (extender.tls_cert, extender.tls_key, "
                "extender.client_ca); or keep it on 127.0.0.1 with kube-scheduler as a sidecar"
            )
        return self


class MetricsListener(_Model):
    """Where Prometheus scrapes `/metrics` (nothing else served there): plain HTTP, or with
    `secure.enabled` HTTPS for bearer tokens allowed to get /metrics only."""

    address: str = Field(default="0.0.0.0", min_length=1)
    port: int = Field(default=9395, ge=0, le=65535)
    secure: SecureMetrics = Field(default_factory=SecureMetrics)


class ExplainListener(_Model):
    """Where `GET /explain/<namespace>/<name>` is served: the scheduler's last decision on a
    pod, which tells other namespaces' request sizes, card UUIDs and free memory, with no
    authentication. So loopback only (in a pod, reached with `kubectl port-forward`, which the
    API server authorises), unless `expose` says to serve it on another address anyway.
    """

    address: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=9396, ge=0, le=65535)
    expose: bool = False

    @model_validator(mode="after")
    def _loopback_unless_exposed(self) -> Self:
        if not self.expose and not is_loopback(self.address):
            raise ValueError(
                f"explain.address {self.address!r} is not a loopback address: /explain answers "
                "anyone who reaches it with any namespace's pods, requests and cards; keep it "
                "on 127.0.0.1 and use kubectl port-forward, or set explain.expose: true to "
                "serve it there without authentication"
            )
        return self


class DraWebhook(_Model):
    """The webhook's DRA mode, `POST /webhook/dra` (docs/dra.md): pods sent there get claims
    of `driver_name`'s devices of the DeviceClass `device_class` (empty: named after the
    driver) instead of vgpu's scheduler. The cluster's GPUs (for memory percentages and card
    types) are listed again at most every `cards_refresh` seconds; each API call the mode
    makes times out after `api_timeout` seconds, so the webhook answers within its own
    deadline."""

    driver_name: DraDriverName = DEFAULT_DRIVER
    device_class: DeviceClassName = ""
    cards_refresh: float = Field(default=30.0, gt=0, le=3600)
    api_timeout: float = Field(default=2.0, gt=0, le=30)


# grant integrity ---------------------------------------------------------------------------------
class Signing(_Model):
    """HMAC-signed grants; the key ring lives in a Secret the device plugin reads too."""

    enabled: bool = True
    secret_namespace: str = Field(default="vgpu-system", min_length=1)
    secret_name: str = Field(default="vgpu-grant-keys", min_length=1)
    refresh_period: float = Field(default=30.0, gt=0)


class SchedulerConfig(_Model):
    """Everything `vgpu scheduler` can be told. Durations are in seconds."""

    scheduler_name: str = Field(default="vgpu-scheduler", min_length=1)
    resources: ResourceNames = Field(default_factory=ResourceNames)
    defaults: Defaults = Field(default_factory=Defaults)
    node_policy: Policy = Policy.BINPACK  # binpack, spread, or vgpu's fgd
    # HAMi's --gpu-scheduler-policy: binpack, spread or topology-aware, optionally with numa or
    # mutex as in the pod annotation (e.g. "binpack,numa"), or vgpu's fgd; a pod's annotation
    # overrides it
    gpu_policy: str = "spread"
    fragmentation: Fragmentation = Field(default_factory=Fragmentation)
    gpu_core_policy: Literal["default", "force", "disable"] = "default"
    overwrite_env: bool = False
    runtime_class: str = ""
    force_overwrite_default_scheduler: bool = True
    combine_scores: bool = False
    lock_expiry: float = Field(default=300.0, gt=0)
    reservation_timeout: float = Field(default=300.0, gt=0)
    sync_timeout: float = Field(default=60.0, gt=0)
    listen_address: str = "127.0.0.1"
    listen_port: int = Field(default=8080, ge=0, le=65535)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    extender: ExtenderListener = Field(default_factory=ExtenderListener)
    metrics: MetricsListener = Field(default_factory=MetricsListener)
    explain: ExplainListener = Field(default_factory=ExplainListener)
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    kubeconfig: Path | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    webhook_tls: WebhookCertsConfig | None = None  # self-managed certificates (certs.py)
    legacy_metrics: bool = False  # HAMi's pre-v2.9 metric names too, as --legacy-metrics
    # grant integrity
    signing: Signing = Field(default_factory=Signing)
    takeover: Takeover = Field(default_factory=Takeover)
    api_request_timeout: float = Field(default=30.0, gt=0)
    # node handshake: whose rules judge a node's device plugin alive, and how often
    hami_version: HamiVersion = HamiVersion.V2_10
    handshake_period: float = Field(default=15.0, gt=0)
    dra: DraWebhook = Field(default_factory=DraWebhook)

    def api_timeout(self) -> float:
        """Every API call's timeout: shorter than the renew deadline when electing a leader,
        so a hung call cannot outlive this replica's leadership."""
        if not self.leader_election.enabled:
            return self.api_request_timeout
        return min(self.api_request_timeout, self.leader_election.renew_deadline / 2)

    @field_validator("gpu_policy")
    @classmethod
    def _known_gpu_policy(cls, value: str) -> str:
        try:
            default_policies(Policy.BINPACK, value)
        except PolicyError as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _tls_pair(self) -> Self:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together (or neither)")
        return self

    # views the domain understands -------------------------------------------------------------
    def vendor(self) -> Vendor:
        r = self.resources
        return Vendor(
            word=r.vendor_word,
            count_resource=r.count,
            memory_resource=r.memory,
            memory_percentage_resource=r.memory_percentage,
            cores_resource=r.cores,
            priority_resource=r.priority,
        )

    def scheduling(
        self,
        recent_shapes: Callable[[], CardWorkload] | None = None,
        card_counts: Callable[[], CardCounts] | None = None,
    ) -> SchedulingConfig:
        """The domain's settings; `recent_shapes` gives what FGD weighs now (a ShapeWindow's),
        `card_counts` the cluster's cards (the ledger's)."""
        d = self.defaults
        return SchedulingConfig(
            vendor=self.vendor(),
            defaults=RequestDefaults(
                gpu_count=d.gpu_count,
                memory=d.memory,
                cores=d.cores,
                memory_factor=d.memory_factor,
            ),
            policies=default_policies(self.node_policy, self.gpu_policy),
            recent_shapes=recent_shapes,
            card_counts=card_counts,
        )

    def admission(self) -> AdmissionConfig:
        return AdmissionConfig(
            scheduler_name=self.scheduler_name,
            scheduling=self.scheduling(),
            gpu_core_policy="" if self.gpu_core_policy == "default" else self.gpu_core_policy,
            overwrite_env=self.overwrite_env,
            runtime_class=self.runtime_class,
            force_overwrite_default_scheduler=self.force_overwrite_default_scheduler,
        )


    def dra_admission(self) -> DraAdmissionConfig:
        return DraAdmissionConfig(self.admission(), self.dra.driver_name, self.dra.device_class)


def default_policies(node: Policy, gpu: str) -> PodPolicies:
    """The cluster-wide policies: `gpu` read as the GPU-policy annotation would be."""
    return pod_policies({GPU_POLICY_ANNOTATION: gpu}, PodPolicies(node=node))


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> SchedulerConfig:
    """Defaults < file < `VGPU_*` environment < overrides; ConfigError names what is wrong."""
    return load_settings(SchedulerConfig, "scheduler", path, env, overrides)
