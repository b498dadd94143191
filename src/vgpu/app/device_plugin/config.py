"""The device plugin's settings: one pydantic model from a YAML file and `VGPU_*` variables.

Precedence, lowest first: defaults, the `--config` file, environment variables (`VGPU_` + the
field name in capitals, e.g. `VGPU_SPLIT_COUNT=4`; the node name also from `NODE_NAME`, as a
DaemonSet sets it with the downward API), command-line flags. Lists in the environment are
comma-separated (`VGPU_DISABLE_CONTROL_NAMESPACES=ml-admin,research`); nested settings join
with `__` (`VGPU_SIGNING__ENABLED=false`). Unknown `VGPU_*` names
are logged and ignored. The loading itself is `vgpu.app.settings`, shared with the scheduler.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vgpu.app.errors import ConfigError
from vgpu.app.settings import ResourceName, VendorWord, load_settings

__all__ = ["NODE_NAME_ENV", "ConfigError", "DevicePluginConfig", "Signing", "load_config"]

NODE_NAME_ENV = "NODE_NAME"


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


class DevicePluginConfig(BaseModel):
    """Everything `vgpu device-plugin` can be told. Durations are in seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_name: str = Field("", description="the Kubernetes node this plugin runs on")
    resource_name: ResourceName = "nvidia.com/gpu"
    vendor_word: VendorWord = "NVIDIA"
    split_count: int = Field(10, ge=1, le=1000)
    memory_scaling: float = Field(1.0, gt=0, le=1000)
    core_scaling: float = Field(1.0, gt=0, le=1000)
    hook_path: str = Field("/usr/local", min_length=1)
    plugin_dir: Path = Path("/var/lib/kubelet/device-plugins")
    endpoint: str = ""  # empty: `<vendor>-<name>.sock` from the resource name (nvidia-gpu.sock)
    node_config_file: Path | None = None
    disable_core_limit: bool = False
    disable_control_namespaces: tuple[str, ...] = ()
    cuda_log_level: str = Field("", pattern=r"^[0-9]*$")
    preferred_allocation: bool = True
    numa_topology: bool = False
    register_interval: float = Field(30.0, gt=0)
    register_retry: float = Field(5.0, gt=0)
    kubelet_poll: float = Field(1.0, gt=0)
    lock_dir: str = "/tmp/vgpulock"
    kubeconfig: Path | None = None
    fake_gpus: Path | None = None
    log_level: str = Field("INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$")
    signing: Signing = Field(default_factory=Signing)
    settle: float = Field(2.0, ge=0, le=30)

    @field_validator("endpoint")
    @classmethod
    def _file_name(cls, value: str) -> str:
        if value and ("/" in value or value in (".", "..")):
            raise ValueError("must be a socket file name inside plugin_dir, without '/'")
        return value

    @model_validator(mode="after")
    def _has_node(self) -> Self:
        if not self.node_name:
            raise ValueError(
                "node_name is required: pass --node-name, or set NODE_NAME or VGPU_NODE_NAME"
            )
        return self

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
    return load_settings(
        DevicePluginConfig, "device-plugin", path, env, overrides, {NODE_NAME_ENV: "node_name"}
    )
