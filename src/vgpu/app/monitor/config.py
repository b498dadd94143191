"""The monitor's settings: one pydantic model from a YAML file, `VGPU_*` variables and flags.

Precedence, lowest first: defaults, the `--config` file, environment variables (`VGPU_` + the
field name in capitals, e.g. `VGPU_METRICS_LISTEN=:9394`; the node name also from `NODE_NAME`),
command-line flags. The loading itself is `vgpu.app.settings`.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from vgpu.app.errors import ConfigError
from vgpu.app.node_agent import NodeAgentSettings
from vgpu.app.secure_metrics import SecureMetrics
from vgpu.app.settings import ListenAddress, host_and_port, load_settings

__all__ = ["ConfigError", "MonitorConfig", "load_config"]


class MonitorConfig(NodeAgentSettings):
    """Everything `vgpu monitor` can be told. Durations are in seconds."""

    host_dir: Path = Path("/usr/local/vgpu/containers")
    # the DRA driver's per-claim directories (<hook>/vgpu/claims); None: read none
    claims_dir: Path | None = Path("/usr/local/vgpu/claims")
    metrics_listen: ListenAddress = ":9394"
    legacy_metrics: bool = False
    priority_feedback: bool = True
    interval: float = Field(5.0, gt=0)
    cleanup_grace: float = Field(300.0, ge=0)

    secure_metrics: SecureMetrics = Field(default_factory=SecureMetrics)

    @property
    def listen_host(self) -> str:
        return host_and_port(self.metrics_listen)[0]

    @property
    def listen_port(self) -> int:
        return host_and_port(self.metrics_listen)[1]


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> MonitorConfig:
    """Defaults < file < environment < overrides (None values ignored); ConfigError if bad."""
    return load_settings(MonitorConfig, "monitor", path, env, overrides, {"NODE_NAME": "node_name"})
