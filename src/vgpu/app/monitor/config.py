"""The monitor's settings: one pydantic model from a YAML file, `VGPU_*` variables and flags.

Precedence, lowest first: defaults, the `--config` file, environment variables (`VGPU_` + the
field name in capitals, e.g. `VGPU_METRICS_LISTEN=:9394`; the node name also from `NODE_NAME`),
command-line flags. The loading itself is `vgpu.app.settings`.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from vgpu.app.errors import ConfigError
from vgpu.app.node_agent import NodeAgentSettings
from vgpu.app.settings import load_settings

__all__ = ["ConfigError", "MonitorConfig", "load_config"]


class MonitorConfig(NodeAgentSettings):
    """Everything `vgpu monitor` can be told. Durations are in seconds."""

    host_dir: Path = Path("/usr/local/vgpu/containers")
    # the DRA driver's per-claim directories (<hook>/vgpu/claims); None: read none
    claims_dir: Path | None = Path("/usr/local/vgpu/claims")
    metrics_listen: str = ":9394"
    legacy_metrics: bool = False
    priority_feedback: bool = True
    interval: float = Field(5.0, gt=0)
    cleanup_grace: float = Field(300.0, ge=0)

    @field_validator("metrics_listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not port.isdecimal() or int(port) > 65535:
            raise ValueError("must be [HOST]:PORT with a port 0-65535, e.g. :9394")
        if host.startswith("[") != host.endswith("]"):
            raise ValueError("an IPv6 host must be in brackets, e.g. [::1]:9394")
        return value

    @property
    def listen_host(self) -> str:
        host = self.metrics_listen.rpartition(":")[0].strip("[]")
        return host or "0.0.0.0"

    @property
    def listen_port(self) -> int:
        return int(self.metrics_listen.rpartition(":")[2])


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> MonitorConfig:
    """Defaults < file < environment < overrides (None values ignored); ConfigError if bad."""
    return load_settings(MonitorConfig, "monitor", path, env, overrides, {"NODE_NAME": "node_name"})
