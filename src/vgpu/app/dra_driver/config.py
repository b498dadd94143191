"""`vgpu dra-driver`'s settings: one pydantic model from a YAML file and `VGPU_*` variables.

Precedence, lowest first: defaults, the `--config` file, environment variables (`VGPU_` + the
field name in capitals, e.g. `VGPU_DRIVER_NAME`; HAMi's `NODE_NAME` and `HOOK_PATH` too, below
the `VGPU_*` names), command-line flags. The loading itself is `vgpu.app.settings`, shared with
the other commands; docs/dra-driver.md lists every setting.
"""

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from vgpu.app.errors import ConfigError
from vgpu.app.node_agent import NodeAgentSettings
from vgpu.app.settings import DraDriverName, ResourceName, load_settings
from vgpu.domain.dra import CDI_KIND, DEFAULT_DRIVER, NVIDIA_CDI_KIND

__all__ = ["ConfigError", "DraDriverConfig", "load_config"]

HAMI_ENV = {"NODE_NAME": "node_name", "HOOK_PATH": "hook_path"}
KUBELET_PLUGINS = Path("/var/lib/kubelet/plugins")
_CDI_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]/[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]$")


class DraDriverConfig(NodeAgentSettings):
    """Everything `vgpu dra-driver` can be told. Durations are in seconds."""

    driver_name: DraDriverName = DEFAULT_DRIVER
    registry_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    plugin_dir: Path | None = None  # None: /var/lib/kubelet/plugins/<driver name>
    cdi_dir: Path = Path("/var/run/cdi")
    # where NVIDIA's CDI spec (nvidia-ctk cdi generate) may be, to make the GPU visible by it
    static_cdi_dirs: tuple[Path, ...] = (Path("/etc/cdi"), Path("/var/run/cdi"))
    # auto: NVIDIA's CDI device where its spec has every GPU of a claim, else the variable
    # NVIDIA_VISIBLE_DEVICES for the NVIDIA container runtime; cdi or env: always that way
    gpu_visibility: Literal["auto", "cdi", "env"] = "auto"
    nvidia_cdi_kind: str = NVIDIA_CDI_KIND
    cdi_kind: str = CDI_KIND
    # where the driver keeps its record of prepared claims, and where the device plugin kept
    # its served record (read to count the pods it served): a host path
    state_dir: Path = Path("/var/lib/vgpu")
    hook_path: str = Field("/usr/local", min_length=1)  # HAMi's HOOK_PATH
    lock_dir: str = "/tmp/vgpulock"
    # the kubelet's device-plugin directory, for its checkpoint of pods device plugins served
    device_plugin_dir: Path = Path("/var/lib/kubelet/device-plugins")
    resource_name: ResourceName = "nvidia.com/gpu"  # the device plugin's resource
    disable_core_limit: bool = False
    cuda_log_level: str = Field("", pattern=r"^[0-9]*$")
    # how often the slice is compared with the API's even when nothing changed here
    resync_interval: float = Field(60.0, gt=0, le=3600)
    publish_retry: float = Field(5.0, gt=0, le=600)
    # how often prepared claims whose ResourceClaim is gone are cleaned up
    sweep_interval: float = Field(60.0, gt=0, le=3600)
    socket_check_interval: float = Field(1.0, gt=0, le=60)

    @field_validator("cdi_kind", "nvidia_cdi_kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if not _CDI_KIND.match(value):
            raise ValueError("must be a CDI kind, vendor/class (vgpu.io/claim)")
        return value

    @property
    def plugin_path(self) -> Path:
        """The driver's own kubelet plugin directory, where `dra.sock` is served."""
        return self.plugin_dir or KUBELET_PLUGINS / self.driver_name


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> DraDriverConfig:
    """Defaults < file < environment < overrides (None values ignored); ConfigError if bad."""
    return load_settings(DraDriverConfig, "dra-driver", path, env, overrides, HAMI_ENV)
