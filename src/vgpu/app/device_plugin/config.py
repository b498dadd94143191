"""The device plugin's settings: one pydantic model from a YAML file and `VGPU_*` variables.

Precedence, lowest first: defaults, the `--config` file, environment variables (`VGPU_` + the
field name in capitals, e.g. `VGPU_SPLIT_COUNT=4`; the node name also from `NODE_NAME`, as a
DaemonSet sets it with the downward API), command-line flags. Lists in the environment are
comma-separated (`VGPU_DISABLE_CONTROL_NAMESPACES=ml-admin,research`).
"""

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vgpu.app.errors import Source, explain

log = logging.getLogger(__name__)

ENV_PREFIX = "VGPU_"
NODE_NAME_ENV = "NODE_NAME"
_RESOURCE_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LIST_FIELDS = ("disable_control_namespaces",)


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the field, the value and the source."""


class DevicePluginConfig(BaseModel):
    """Everything `vgpu device-plugin` can be told. Durations are in seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_name: str = Field("", description="the Kubernetes node this plugin runs on")
    resource_name: str = "nvidia.com/gpu"
    vendor_word: str = Field("NVIDIA", min_length=1, pattern=r"^[^,:;]+$")
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

    @field_validator("resource_name")
    @classmethod
    def _extended_name(cls, value: str) -> str:
        if not _RESOURCE_NAME.match(value):
            raise ValueError("must be an extended resource name such as nvidia.com/gpu")
        return value

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
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if path is not None:
        values = read_yaml_mapping(path)
        sources.update({key: str(path) for key in values})
    env_values, env_sources = _from_env(env or {})
    values.update(env_values)
    sources.update(env_sources)
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = value
            sources[key] = "command line"
    try:
        return DevicePluginConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(
            "invalid device-plugin configuration: " + explain(exc, "", _origin(sources))
        ) from None


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML (or JSON) file holding a mapping; ConfigError names the file and the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML or JSON: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping, not {type(data).__name__}")
    return data


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if env.get(NODE_NAME_ENV):
        values["node_name"] = env[NODE_NAME_ENV]
        sources["node_name"] = NODE_NAME_ENV
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key not in DevicePluginConfig.model_fields:
            continue  # other commands' settings share the prefix
        values[key] = (
            [p.strip() for p in raw.split(",") if p.strip()] if key in _LIST_FIELDS else raw
        )
        sources[key] = name
    return values, sources


def _origin(sources: Mapping[str, str]) -> Source:
    return lambda loc: sources.get(str(loc[0])) if loc else None
