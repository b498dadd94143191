"""The device plugin's settings: one pydantic model from a YAML file and `VGPU_*` variables.

Precedence, lowest first: defaults, the `--config` file, environment variables (`VGPU_` + the
field name in capitals, e.g. `VGPU_SPLIT_COUNT=4`; HAMi's `NODE_NAME`, `HOOK_PATH` and
`ENABLE_TOPOLOGY_SCORE` too, below the `VGPU_*` names), command-line flags. Lists in the
environment are comma-separated (`VGPU_DISABLE_CONTROL_NAMESPACES=ml-admin,research`); nested
settings join with `__` (`VGPU_SIGNING__ENABLED=false`). Unknown `VGPU_*` names are logged and
ignored. The loading itself is `vgpu.app.settings`, shared with the scheduler.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vgpu.app.errors import ConfigError
from vgpu.app.node_agent import NodeAgentSettings
from vgpu.app.settings import (
    ListenAddressOrOff,
    ResourceName,
    Takeover,
    VendorWord,
    load_settings,
)
from vgpu.domain.mig import AllowlistError, MigAllowlistEntry, check_allowlist

__all__ = [
    "NODE_NAME_ENV",
    "ConfigError",
    "DevicePluginConfig",
    "MigAllowlistItem",
    "Signing",
    "load_config",
]

NODE_NAME_ENV = "NODE_NAME"
# The variables HAMi's chart sets on its device plugin, read below the `VGPU_*` names so a
# DaemonSet written for HAMi keeps its meaning.
HAMI_ENV = {
    NODE_NAME_ENV: "node_name",
    "HOOK_PATH": "hook_path",
    "ENABLE_TOPOLOGY_SCORE": "topology_score",
}


class Signing(BaseModel):
    """Which grants the plugin serves: signed ones (vgpu's scheduler), or with `enabled: false`
    (HAMi's scheduler, which does not sign) those on pods naming a trusted scheduler."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    secret_namespace: str = Field(default="vgpu-system", min_length=1)
    secret_name: str = Field(default="vgpu-grant-keys", min_length=1)
    refresh_interval: float = Field(default=30.0, gt=0)
    unknown_key_retry: float = Field(default=5.0, gt=0)
    trusted_schedulers: tuple[str, ...] = ("hami-scheduler", "vgpu-scheduler")

    @model_validator(mode="after")
    def _trusts_someone(self) -> Self:
        if not self.enabled and not self.trusted_schedulers:
            raise ValueError(
                "with signing off, trusted_schedulers must name at least one scheduler"
            )
        return self


class MigAllowlistItem(BaseModel):
    """One `migProfileAllowlist` entry: GPU models (substrings of the NVML name) and the MIG
    profiles they may be cut into (docs/protocol.md#mig-profile-allowlist)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: tuple[str, ...]
    profiles: tuple[str, ...]

    def entry(self) -> MigAllowlistEntry:
        return MigAllowlistEntry(self.models, self.profiles)


class DevicePluginConfig(NodeAgentSettings):
    """Everything `vgpu device-plugin` can be told. Durations are in seconds."""

    resource_name: ResourceName = "nvidia.com/gpu"
    vendor_word: VendorWord = "NVIDIA"
    split_count: int = Field(10, ge=1, le=1000)
    memory_scaling: float = Field(1.0, gt=0, le=1000)
    core_scaling: float = Field(1.0, gt=0, le=1000)
    hook_path: str = Field("/usr/local", min_length=1)  # HAMi's HOOK_PATH
    plugin_dir: Path = Path("/var/lib/kubelet/device-plugins")
    endpoint: str = ""  # empty: `<vendor>-<name>.sock` from the resource name (nvidia-gpu.sock)
    node_config_file: Path | None = None
    disable_core_limit: bool = False
    disable_control_namespaces: tuple[str, ...] = ()
    cuda_log_level: str = Field("", pattern=r"^[0-9]*$")
    preferred_allocation: bool = True
    numa_topology: bool = False
    register_interval: float = Field(30.0, gt=0)
    # Publish NVLink/PCIe pair scores in hami.io/node-nvidia-score (HAMi: ENABLE_TOPOLOGY_SCORE).
    topology_score: bool = False
    # Answer HAMi schedulers' `Requesting_` handshake with `Reported <time>`
    # (docs/protocol.md#node-handshake).
    report_handshake: bool = True
    register_retry: float = Field(5.0, gt=0)
    kubelet_poll: float = Field(1.0, gt=0)
    lock_dir: str = "/tmp/vgpulock"
    signing: Signing = Field(default_factory=Signing)
    takeover: Takeover = Field(default_factory=Takeover)
    # what the plugin served, kept across restarts where tenants cannot write (a host path)
    state_dir: Path = Path("/var/lib/vgpu")
    # how often ended pods leave the served record and the node's unsigned grants are counted
    occupancy_check_interval: float = Field(30.0, gt=0, le=3600)
    settle: float = Field(2.0, ge=0, le=30)
    # HAMi's nvidia.migProfileAllowlist; None: every profile NVML offers, under NVML's names
    mig_profile_allowlist: tuple[MigAllowlistItem, ...] | None = None
    # how often MIG instances of finished or deleted pods are looked for and destroyed
    mig_reconcile_interval: float = Field(5.0, gt=0, le=3600)
    # where /healthz and /readyz are served (docs/device-plugin.md#health); empty: nowhere
    health_listen: ListenAddressOrOff = ":9397"
    # a kubelet session step (serve, register, check for a restart) under way for longer makes
    # /healthz fail, so that the kubelet restarts the plugin
    liveness_stall: float = Field(60.0, gt=0, le=3600)

    @field_validator("mig_profile_allowlist")
    @classmethod
    def _hami_allowlist(
        cls, value: tuple[MigAllowlistItem, ...] | None
    ) -> tuple[MigAllowlistItem, ...] | None:
        if value is not None:
            try:
                check_allowlist([item.entry() for item in value])
            except AllowlistError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def mig_allowlist(self) -> tuple[MigAllowlistEntry, ...] | None:
        if self.mig_profile_allowlist is None:
            return None
        return tuple(item.entry() for item in self.mig_profile_allowlist)

    @field_validator("endpoint")
    @classmethod
    def _file_name(cls, value: str) -> str:
        if value and ("/" in value or value in (".", "..")):
            raise ValueError("must be a socket file name inside plugin_dir, without '/'")
        return value

    @property
    def socket_name(self) -> str:
        """The plugin's socket file name inside `plugin_dir` (HAMi: `nvidia-gpu.sock`)."""
        if self.endpoint:
            return self.endpoint
        domain, _, name = self.resource_name.partition("/")
        return f"{domain.split('.')[0]}-{name}.sock"


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> DevicePluginConfig:
    """Defaults < file < environment < overrides (None values ignored); ConfigError if bad."""
    return load_settings(DevicePluginConfig, "device-plugin", path, env, overrides, HAMI_ENV)
