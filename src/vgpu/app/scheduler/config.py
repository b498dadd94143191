"""The scheduler's settings: one pydantic model, read from a YAML file and `VGPU_*` variables.

Precedence, lowest first: defaults, the `--config` file, environment variables, command-line
flags. A nested field is set from the environment with `__` between levels, e.g.
`VGPU_LEADER_ELECTION__ENABLED=true` or `VGPU_DEFAULTS__MEMORY=1024`.
"""

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vgpu.app.errors import explain
from vgpu.domain import (
    AdmissionConfig,
    PodPolicies,
    Policy,
    RequestDefaults,
    SchedulingConfig,
    Vendor,
)

log = logging.getLogger(__name__)

ENV_PREFIX = "VGPU_"
_RESOURCE_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the field, the value and the source."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResourceNames(_Model):
    """Extended resource names pods use, and the vendor word written into grants."""

    count: str = "nvidia.com/gpu"
    memory: str = "nvidia.com/gpumem"
    memory_percentage: str = "nvidia.com/gpumem-percentage"
    cores: str = "nvidia.com/gpucores"
    priority: str = "nvidia.com/priority"
    vendor_word: str = Field(default="NVIDIA", min_length=1, pattern=r"^[^,:;]+$")

    @field_validator("count", "memory", "memory_percentage", "cores", "priority")
    @classmethod
    def _extended_name(cls, value: str) -> str:
        if not _RESOURCE_NAME.match(value):
            raise ValueError("must be an extended resource name such as nvidia.com/gpu")
        return value


class Defaults(_Model):
    """HAMi's device-config defaults for requests that leave something out."""

    gpu_count: int = Field(default=1, ge=1, le=1 << 16)
    memory: int = Field(default=0, ge=0, le=2**31 - 1)
    cores: int = Field(default=0, ge=0, le=100)
    memory_factor: int = Field(default=1, ge=1, le=1 << 20)


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


class SchedulerConfig(_Model):
    """Everything `vgpu scheduler` can be told. Durations are in seconds."""

    scheduler_name: str = Field(default="vgpu-scheduler", min_length=1)
    resources: ResourceNames = Field(default_factory=ResourceNames)
    defaults: Defaults = Field(default_factory=Defaults)
    node_policy: Policy = Policy.BINPACK
    gpu_policy: Policy = Policy.SPREAD
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
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    kubeconfig: Path | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

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

    def scheduling(self) -> SchedulingConfig:
        d = self.defaults
        return SchedulingConfig(
            vendor=self.vendor(),
            defaults=RequestDefaults(
                gpu_count=d.gpu_count,
                memory=d.memory,
                cores=d.cores,
                memory_factor=d.memory_factor,
            ),
            policies=PodPolicies(node=self.node_policy, gpu=self.gpu_policy),
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


def load_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> SchedulerConfig:
    """Defaults < file < `VGPU_*` environment < overrides; ConfigError names what is wrong."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if path is not None:
        values = _read_file(path)
        sources.update({key: str(path) for key in values})
    env_values, env_sources = _from_env(env or {})
    _merge(values, env_values)
    sources.update(env_sources)
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = value
            sources[key] = "command line"
    try:
        return SchedulerConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError("invalid configuration: " + _explain_with_sources(exc, sources)) from None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(data).__name__}")
    return data


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        if not _known(path):
            log.warning("ignoring %s: no scheduler setting has that name", name)
            continue
        target = values
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = raw
        sources[".".join(path)] = name
        sources.setdefault(path[0], name)
    return values, sources


def _known(path: list[str]) -> bool:
    model: type[BaseModel] | None = SchedulerConfig
    for part in path:
        if model is None or part not in model.model_fields:
            return False
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            model = None
    return model is None


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _explain_with_sources(exc: ValidationError, sources: Mapping[str, str]) -> str:
    def source(loc: tuple[int | str, ...]) -> str | None:
        for depth in range(len(loc), 0, -1):
            found = sources.get(".".join(str(p) for p in loc[:depth]))
            if found:
                return found
        return None

    return explain(exc, "field ", source)
