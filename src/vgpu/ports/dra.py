"""Kubernetes DRA (`resource.k8s.io/v1`) as the processes meet it.

`vgpu explain` lists the DRA objects (`DraReadPort`); the scheduler's webhook lists the
slices too and makes ResourceClaimTemplates (`ClaimTemplatePort`). `vgpu dra-driver` needs the
kubelet's DRA plugin protocol (both sides), the API objects it reads and writes, the CDI spec
files it leaves for the container runtime, its per-claim host directories and its durable
record of prepared claims. Objects come as the API serves them (JSON mappings), which
`vgpu.domain.dra` reads, saying which field of which object cannot be read; requests and
answers are plain dataclasses, so the application never sees protobuf types or the Kubernetes
client.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

JsonObject = Mapping[str, Any]


class DraKubeletError(RuntimeError):
    """A socket cannot be served (directory missing, path too long, a non-socket in the way);
    the message names the path and why."""


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A ResourceClaim the kubelet names in a Prepare or Unprepare call."""

    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One device of a prepared claim as the kubelet gets it: which requests it serves, where
    it is, the CDI ids the runtime must inject, and the share it is (consumable capacity)."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    """The answer for one claim: its devices, or `error` (then the devices are ignored)."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class DeviceHealthReport:
    """One device's health for the kubelet's `NodeWatchResources` stream; `healthy` None is
    unknown. `updated_at` is Unix seconds."""

    pool: str
    device: str
    healthy: bool | None
    updated_at: int
    message: str = ""
    timeout_s: int = 0  # 0: the kubelet's default


@dataclass(frozen=True, slots=True)
class RegistrationStatus:
    """What the kubelet last told the driver about its registration."""

    registered: bool
    error: str = ""


class DraPluginHandler(Protocol):
    """The driver's behaviour behind the kubelet's DRA calls. Per-claim failures go in the
    per-claim answers; an exception fails the whole call (the kubelet retries it)."""

    def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, ClaimOutcome]:
        """An outcome for every claim, by claim uid."""
        ...

    def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        """An error ("" for success) for every claim, by claim uid."""
        ...

    def watch_health(self, active: Callable[[], bool]) -> Iterator[list[DeviceHealthReport]]:
        """Every device's health now, then the devices whose health changed, while `active()`."""
        ...

    def registration(self, status: RegistrationStatus) -> None:
        """The kubelet's word on the registration (`NotifyRegistrationStatus`)."""
        ...


class DraKubeletPort(Protocol):
    """Serving the DRA plugin and its registration to the kubelet on unix sockets."""

    @property
    def plugin_socket(self) -> str:
        """`<plugin dir>/dra.sock`, where the kubelet calls Prepare, Unprepare and health."""
        ...

    @property
    def registration_socket(self) -> str:
        """`<registry dir>/<driver>-reg.sock`, which the kubelet's plugin watcher finds."""
        ...

    def serve(self, handler: DraPluginHandler) -> None:
        """Serve the plugin socket first, then the registration socket (stale ones replaced)."""
        ...

    def sockets_present(self) -> bool:
        """Whether both sockets are still the files this process serves."""
        ...

    def stop(self) -> None:
        """Stop serving and remove our own socket files; harmless when not serving."""
        ...


class DraReadPort(Protocol):
    """Lists ResourceClaims (every namespace), ResourceClaimTemplates, ResourceSlices and
    DeviceClasses. ClusterError when the API cannot be read; an API server without
    `resource.k8s.io/v1` (DRA off, Kubernetes before 1.34) lists nothing."""

    def list_resource_claims(self) -> list[dict[str, Any]]: ...

    def list_resource_claim_templates(self) -> list[dict[str, Any]]: ...

    def list_resource_slices(self) -> list[dict[str, Any]]: ...

    def list_device_classes(self) -> list[dict[str, Any]]: ...


class ClaimTemplatePort(Protocol):
    """The ResourceClaimTemplates the webhook makes in a pod's namespace (DRA mode). Raises
    `vgpu.ports.cluster.ClusterError`: Conflict when one of that name exists, NotFound when
    the API does not serve them, Rejected for another refusal, plain ClusterError when the
    outcome is unknown (a timeout)."""

    def get_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The template as the API has it now; None when there is none."""
        ...

    def create_claim_template(self, manifest: JsonObject) -> dict[str, Any]:
        """Create it in the namespace its metadata names."""
        ...


class DraApiPort(Protocol):
    """The API objects the driver reads and writes, as JSON: ResourceSlices of its driver and
    node, ResourceClaims and Pods. Raises `vgpu.ports.cluster.ClusterError` (NotFound,
    Conflict, Rejected) as ClusterPort does."""

    def list_slices(self, driver: str, node: str) -> list[dict[str, Any]]: ...

    def create_slice(self, manifest: JsonObject) -> dict[str, Any]: ...

    def replace_slice(self, manifest: JsonObject) -> dict[str, Any]:
        """PUT with the manifest's `metadata.resourceVersion` as precondition."""
        ...

    def delete_slice(self, name: str) -> None: ...

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ResourceClaim as the API has it now (never a cache); None when missing."""
        ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


class HostFileError(RuntimeError):
    """A host file or directory cannot be written, read or removed; the message names the
    path and the system's reason (read-only, full, permission)."""


class CdiSpecPort(Protocol):
    """Transient CDI spec files, one per prepared claim, in the runtime's dynamic CDI dir."""

    @property
    def directory(self) -> str: ...

    def write(self, claim_uid: str, spec: JsonObject) -> str:
        """Replace the claim's spec atomically (temporary file, fsync, rename, fsync of the
        directory); the path. HostFileError when it cannot be written (nothing half-written
        is left behind)."""
        ...

    def read(self, claim_uid: str) -> dict[str, Any] | None:
        """The claim's spec as written; None when missing or unreadable."""
        ...

    def remove(self, claim_uid: str) -> None:
        """Remove the claim's spec; one already gone is not an error."""
        ...

    def claim_uids(self) -> list[str]:
        """The claims that have a spec file of ours in the directory."""
        ...


class CdiCatalogPort(Protocol):
    """The static CDI specs other software installed (NVIDIA's, from nvidia-ctk)."""

    def device_names(self, kind: str) -> set[str]:
        """Names of the devices of `kind` (`vendor/class`) the static specs define."""
        ...


class ClaimDirsPort(Protocol):
    """Per-claim, per-share directories on the host holding HAMi-core's shared cache, beside
    a `claim.json` that says whose they are."""

    def path(self, claim_uid: str, share: str) -> str:
        """`<hook>/vgpu/claims/<claim uid>/<share>`, the same inside the container."""
        ...

    def prepare(self, claim_uid: str, shares: Sequence[str], info: JsonObject) -> None:
        """Make the claim's directory, one for each of `shares` in it (open to any container
        user), and write `claim.json` atomically. HostFileError when it cannot."""
        ...

    def read_info(self, claim_uid: str) -> str | None:
        """The claim's `claim.json` as text; None when there is none. HostFileError when it
        cannot be read."""
        ...

    def remove(self, claim_uid: str) -> None:
        """Remove every directory of the claim; one already gone is not an error."""
        ...

    def claim_uids(self) -> list[str]: ...


class PreparedStorePort(Protocol):
    """The driver's record of prepared claims, as text, kept durably on the host."""

    @property
    def location(self) -> str: ...

    def load(self) -> str | None:
        """The record's text; None when there is none yet. HostFileError when it cannot be
        read at all."""
        ...

    def save(self, text: str) -> None:
        """Replace the record durably and all at once; HostFileError when it cannot."""
        ...

    def set_aside(self) -> str:
        """Move a record that does not read out of the way; where it went."""
        ...
