"""A simulation scenario: the cluster, the namespaces with their quotas and the workload.

Loaded from YAML and validated with pydantic; every error names the field and the value.
The schema is documented in docs/simulate.md.
"""

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)

from vgpu.app.errors import ConfigError, problems
from vgpu.app.settings import parse_yaml_mapping, read_text
from vgpu.domain.quantity import memory_mib

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TAGS = ("fixed", "range", "choice", "uniform", "exponential", "lognormal")


class ScenarioError(ValueError):
    """The scenario file cannot be read or is invalid; the message names the field."""


def _offset(value: Any) -> float:
    """A point in simulated time: a duration, or 0."""
    return 0.0 if value == 0 and not isinstance(value, bool) else _seconds(value)


def _seconds(value: Any) -> float:
    """`90`, `90s`, `30m`, `1h30m`, `1d`: a duration in seconds."""
    if isinstance(value, bool):
        raise ValueError("must be a duration such as 90s, 30m, 2h or 1d")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError("must be a duration such as 90s, 30m, 2h or 1d")
        seconds = sum(float(n) * _SECONDS[u] for n, u in parts)
    else:
        raise ValueError("must be a duration such as 90s, 30m, 2h or 1d")
    if seconds <= 0:
        raise ValueError("must be longer than zero")
    return seconds


def _mib(value: Any) -> int:
    """GPU memory: a plain number is MiB, a quantity with a unit (`20Gi`) is bytes."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be MiB as a whole number or a quantity such as 20Gi")
    amount = memory_mib(value)
    if amount != amount.to_integral_value() or amount < 1:
        raise ValueError("must be a whole number of MiB, at least 1")
    return int(amount)


def _dns_name(value: str) -> str:
    if not _NAME.match(value) or len(value) > 40:
        raise ValueError("must be lower-case letters, digits and '-' (at most 40 characters)")
    return value


Seconds = Annotated[float, BeforeValidator(_seconds)]
Offset = Annotated[float, BeforeValidator(_offset)]
MiB = Annotated[int, BeforeValidator(_mib)]
Name = Annotated[str, AfterValidator(_dns_name)]
T = TypeVar("T", int, float)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(_Strict, Generic[T]):
    """A value drawn uniformly between `min` and `max` (inclusive)."""

    min: T
    max: T

    @model_validator(mode="after")
    def _ordered(self) -> "Range[T]":
        if self.min > self.max:
            raise ValueError(f"min={self.min} is above max={self.max}")
        return self


class Choice(_Strict, Generic[T]):
    """A value picked from `choices`, with optional relative `weights`."""

    choices: list[T] = Field(min_length=1)
    weights: list[Annotated[float, Field(gt=0)]] | None = None

    @model_validator(mode="after")
    def _same_length(self) -> "Choice[T]":
        if self.weights is not None and len(self.weights) != len(self.choices):
            raise ValueError(
                f"weights has {len(self.weights)} entries but choices has {len(self.choices)}"
            )
        return self


def _sampled_kind(value: Any) -> str:
    if isinstance(value, dict | BaseModel):
        keys = value.keys() if isinstance(value, dict) else type(value).model_fields.keys()
        return "choice" if "choices" in keys else "range"
    return "fixed"


def _bounded(low: int, high: int) -> Any:
    def check(value: Any) -> Any:
        values: list[int] = []
        if isinstance(value, int):
            values = [value]
        elif isinstance(value, Range):
            values = [value.min, value.max]
        elif isinstance(value, Choice):
            values = list(value.choices)
        for v in values:
            if not low <= v <= high:
                raise ValueError(f"{v} is outside {low}..{high}")
        return value

    return AfterValidator(check)


IntSample = Annotated[
    Annotated[int, Tag("fixed")]
    | Annotated[Range[int], Tag("range")]
    | Annotated[Choice[int], Tag("choice")],
    Discriminator(_sampled_kind),
]
"""A constant, a `{min, max}` range or a `{choices, weights}` pick."""
MemorySample = Annotated[
    Annotated[MiB, Tag("fixed")]
    | Annotated[Range[MiB], Tag("range")]
    | Annotated[Choice[MiB], Tag("choice")],
    Discriminator(_sampled_kind),
]
CountSample = Annotated[IntSample, _bounded(1, 1024)]
PercentSample = Annotated[IntSample, _bounded(0, 100)]
ShareSample = Annotated[IntSample, _bounded(1, 100)]
Sample = int | Range[int] | Choice[int]


class FixedRuntime(_Strict):
    """Every pod runs exactly `value`."""

    distribution: Literal["fixed"]
    value: Seconds


class UniformRuntime(_Strict):
    distribution: Literal["uniform"]
    min: Seconds
    max: Seconds

    @model_validator(mode="after")
    def _ordered(self) -> "UniformRuntime":
        if self.min > self.max:
            raise ValueError(f"min={self.min}s is above max={self.max}s")
        return self


class ExponentialRuntime(_Strict):
    """Memoryless run times with the given `mean`, cut at `max` when set."""

    distribution: Literal["exponential"]
    mean: Seconds
    max: Seconds | None = None


class LognormalRuntime(_Strict):
    """Long-tailed run times: half the pods run less than `median`; `sigma` widens the tail."""

    distribution: Literal["lognormal"]
    median: Seconds
    sigma: float = Field(default=1.0, gt=0, le=5)
    max: Seconds | None = None


Runtime = Annotated[
    FixedRuntime | UniformRuntime | ExponentialRuntime | LognormalRuntime,
    Field(discriminator="distribution"),
]


class NodePool(_Strict):
    """`count` identical nodes named `<name>-<n>`, each with `gpus` cards of one model."""

    name: Name
    count: int = Field(ge=1, le=20000)
    gpus: int = Field(ge=1, le=64)
    model: str = Field(default="NVIDIA A100-SXM4-80GB", min_length=1)
    memory: MiB = 81920
    split_count: int = Field(default=10, ge=1, le=1000)
    memory_scaling: float = Field(default=1.0, gt=0, le=100)
    core_scaling: float = Field(default=1.0, gt=0, le=100)
    numa_nodes: int = Field(default=1, ge=1, le=64)


class Quota(_Strict):
    """HAMi's extended ResourceQuota for a namespace (`limits.nvidia.com/...`)."""

    gpumem: MiB | None = None
    gpucores: int | None = Field(default=None, ge=0)
    gpus: int | None = Field(default=None, ge=0)


class Namespace(_Strict):
    name: Name
    quota: Quota | None = None


class Workload(_Strict):
    """A stream of pods of one kind: how often they come, what they ask for, how long they run.

    Each pod has one container asking for `gpus` cards, each with `memory` MiB (or
    `memory_percent` of the card; neither means the whole card) and `cores` percent.
    """

    name: Name
    namespace: Name = "default"
    arrivals_per_hour: float = Field(gt=0, le=1_000_000)
    daily_swing: float = Field(default=0.0, ge=0, le=1)
    peak_hour: float = Field(default=14.0, ge=0, lt=24)
    start: Offset = 0.0
    gpus: CountSample = 1
    memory: MemorySample | None = None
    memory_percent: ShareSample | None = None
    cores: PercentSample | None = None
    runtime: Runtime
    annotations: dict[str, str] = Field(default_factory=dict)
    # spec.priority, as a PriorityClass would resolve it; only matters with `preemption`
    priority: int = Field(default=0, strict=True, ge=-(2**31), le=1_000_000_000)

    @model_validator(mode="after")
    def _one_memory(self) -> "Workload":
        if self.memory is not None and self.memory_percent is not None:
            raise ValueError("give memory or memory_percent, not both")
        return self


class Scenario(_Strict):
    """Everything one simulation needs. `seed` makes the workload reproducible."""

    name: str = Field(default="scenario", min_length=1)
    description: str = ""
    seed: int = 0
    duration: Seconds = 86400.0
    sample_every: Seconds = 300.0
    nodes: list[NodePool] = Field(min_length=1)
    namespaces: list[Namespace] = Field(default_factory=list)
    workloads: list[Workload] = Field(min_length=1)
    preemption: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _consistent(self) -> "Scenario":
        _unique("nodes", [p.name for p in self.nodes])
        _unique("namespaces", [n.name for n in self.namespaces])
        _unique("workloads", [w.name for w in self.workloads])
        declared = {n.name for n in self.namespaces} | {"default"}
        for i, workload in enumerate(self.workloads):
            if workload.namespace not in declared:
                known = ", ".join(sorted(declared))
                raise ValueError(
                    f"workloads[{i}].namespace={workload.namespace!r} is not declared under "
                    f"namespaces (declared: {known})"
                )
        if self.sample_every > self.duration:
            raise ValueError(
                f"sample_every={self.sample_every:g}s is longer than duration={self.duration:g}s"
            )
        if self.duration / self.sample_every > 100_000:
            raise ValueError("duration / sample_every must be at most 100000 samples")
        total = sum(p.count for p in self.nodes)
        if total > 20000:
            raise ValueError(f"nodes add up to {total} nodes; at most 20000 are supported")
        return self

    def namespace(self, name: str) -> Namespace:
        for namespace in self.namespaces:
            if namespace.name == name:
                return namespace
        return Namespace(name=name)


def _unique(field: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{field}: name {name!r} is used twice")
        seen.add(name)


def _scenario_problems(exc: ValidationError, source: str) -> str:
    """One line per problem: `<source>: workloads[0].memory.max: <what is wrong> (got ...)`."""
    return "\n".join(f"{source}: {line}" for line in problems(exc, hidden=_union_branch))


def _union_branch(part: str) -> bool:
    """pydantic's name for the branch of a union, not a field the user wrote."""
    return part in _TAGS or part.startswith(("Range[", "Choice["))


def parse_scenario(text: str, source: str = "scenario") -> Scenario:
    """Validate YAML or JSON text; ScenarioError says what is wrong, field by field."""
    try:
        data = parse_yaml_mapping(text, source)
    except ConfigError as exc:
        raise ScenarioError(str(exc)) from None
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(_scenario_problems(exc, source)) from None


def load_scenario(path: Path | None = None) -> Scenario:
    """Read a scenario file, or the embedded default one when `path` is None."""
    if path is None:
        return parse_scenario(default_scenario_text(), "default scenario")
    try:
        text = read_text(path, "scenario")
    except ConfigError as exc:
        raise ScenarioError(str(exc)) from None
    return parse_scenario(text, str(path))


def default_scenario_text() -> str:
    """The embedded default scenario (package data `default.yaml`)."""
    return resources.files(__package__).joinpath("default.yaml").read_text(encoding="utf-8")
