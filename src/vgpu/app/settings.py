"""A command's settings: a pydantic model filled from a YAML file, `VGPU_*` variables and flags.

Precedence, lowest first: the model's defaults, the file, the environment, command-line
overrides. A variable is `VGPU_` + the field name in capitals, nested fields joined with `__`
(`VGPU_LEADER_ELECTION__ENABLED=true`); a list field takes a comma-separated value; a name that
matches no field is logged and ignored. Every value remembers where it came from, so an invalid
one is reported with its field, its value and its source:
`field listen_port: Input should be a valid integer ... (got 'abc') [from VGPU_LISTEN_PORT]`.
"""

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_origin

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from vgpu.app.errors import ConfigError, Location, listed_problems

log = logging.getLogger(__name__)

ENV_PREFIX = "VGPU_"
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_LISTS = (list, tuple, set, frozenset)
_RESOURCE_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)

Settings = TypeVar("Settings", bound=BaseModel)


def _extended_resource_name(value: str) -> str:
    if not _RESOURCE_NAME.match(value):
        raise ValueError("must be an extended resource name such as nvidia.com/gpu")
    return value


ResourceName = Annotated[str, AfterValidator(_extended_resource_name)]
"""A setting that names an extended resource, `<domain>/<name>` (`nvidia.com/gpumem`)."""

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")


def _dra_driver_name(value: str) -> str:
    if len(value) > 63 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            "must be a DNS subdomain of at most 63 lower-case characters (gpu.vgpu.io)"
        )
    return value


def _device_class_name(value: str) -> str:
    if value and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
        raise ValueError("must be a DNS subdomain in lower case (gpu.vgpu.io), or empty")
    return value


DraDriverName = Annotated[str, AfterValidator(_dra_driver_name)]
"""A DRA driver's name as the API server wants it: a DNS subdomain of at most 63 characters."""

DeviceClassName = Annotated[str, AfterValidator(_device_class_name)]
"""A DeviceClass's name (a DNS subdomain), or empty for the default."""

VendorWord = Annotated[str, Field(min_length=1, pattern=r"^[^,:;]+$")]
"""The vendor word written into grants (`NVIDIA`): no separator of the annotation formats."""


def _listen_address(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdecimal() or int(port) > 65535:
        raise ValueError("must be [HOST]:PORT with a port 0-65535, e.g. :9394")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError("an IPv6 host must be in brackets, e.g. [::1]:9394")
    return value


def _listen_address_or_off(value: str) -> str:
    return _listen_address(value) if value else value


ListenAddress = Annotated[str, AfterValidator(_listen_address)]
"""Where a listener takes connections, `[HOST]:PORT` (`:9394`, `127.0.0.1:9394`, `[::1]:9394`);
no host means every IPv4 address."""

ListenAddressOrOff = Annotated[str, AfterValidator(_listen_address_or_off)]
"""A `ListenAddress`, or empty for no listener at all."""


def host_and_port(address: str) -> tuple[str, int]:
    """A valid `ListenAddress` split: the host without brackets (`0.0.0.0` when none), the port."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


class Takeover(BaseModel):
    """Taking a running cluster over from HAMi (docs/migrate-from-hami.md). With `from_hami`,
    grants that HAMi's scheduler (`hami_scheduler_names`) writes, unsigned, are believed as if
    signed: the scheduler counts its pending pods and the device plugin serves them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    from_hami: bool = False
    hami_scheduler_names: tuple[str, ...] = ("hami-scheduler",)


def load_settings(
    model: type[Settings],
    command: str,
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> Settings:
    """Defaults < file < environment < overrides (None values ignored); ConfigError if bad.

    An override key may be dotted (`extender.port`) to set one nested field.
    `command` names the program in messages; `aliases` maps other variable names to a field
    (`NODE_NAME` -> `node_name`), read when set and not empty, below the `VGPU_*` names.
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if path is not None:
        values = read_yaml_mapping(path, "config file")
        _record_all(sources, values, (), str(path))
    env_values, env_sources = _from_env(model, command, env or {}, aliases or {})
    _merge(values, env_values)
    for dotted, name in env_sources.items():
        _record(sources, dotted.split("."), name)
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_nested(values, key.split("."), value)
            for dotted in [d for d in sources if d.startswith(f"{key}.")]:
                del sources[dotted]
            _record(sources, key.split("."), "command line")
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        head = f"invalid {command} configuration"
        raise ConfigError(
            listed_problems(exc, head, "field ", lambda loc: _origin(sources, loc))
        ) from None


def read_text(path: Path, what: str) -> str:
    """The file's text; ConfigError `cannot read <what> <path>: <reason>`."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def parse_yaml_mapping(text: str, source: str) -> dict[str, Any]:
    """YAML or JSON text holding a mapping, empty text as `{}`; ConfigError names `source`.

    JSON text (it starts with `{`) goes to the standard JSON parser and the rest to libyaml's C
    loader when PyYAML has it: a 1000-node fake cluster loads in well under a second instead of
    minutes with the pure-Python loader. The results are the same (JSON is YAML)."""
    data = _json(text)
    if data is None:
        try:
            data = yaml.load(text, Loader=_SafeLoader)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML{_yaml_fault(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a YAML mapping, not {type(data).__name__}")
    return data


def _yaml_fault(exc: yaml.YAMLError) -> str:
    """`, line L column C: <problem> (<context>)`: PyYAML's own text would name the parsed
    string, `<unicode string>`, where the caller names the file."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return f": {exc}"
    context = getattr(exc, "context", None)
    return f", line {mark.line + 1} column {mark.column + 1}: {problem}" + (
        f" ({context})" if context else ""
    )


def _json(text: str) -> Any:
    """The JSON value, or None when the text is not JSON (YAML then decides)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except ValueError:  # a YAML flow mapping, or broken: YAML's error is the one to show
        return None


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML (or JSON) file holding a mapping; ConfigError names `what`, the file and the fault."""
    return parse_yaml_mapping(read_text(path, what), f"{what} {path}")


def _from_env(
    model: type[BaseModel], command: str, env: Mapping[str, str], aliases: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    named = [(name, field.split(".")) for name, field in aliases.items() if env.get(name)]
    for name in sorted(env):
        if name.startswith(ENV_PREFIX):
            named.append((name, [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]))
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, path in named:
        field = _leaf(model, path)
        if field is None:
            log.warning("ignoring %s: no %s setting has that name", name, command)
            continue
        raw = env[name]
        target = values
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = (
            [p.strip() for p in raw.split(",") if p.strip()]
            if get_origin(field.annotation) in _LISTS
            else raw
        )
        sources[".".join(path)] = name
    return values, sources


def _leaf(model: type[BaseModel], path: list[str]) -> FieldInfo | None:
    """The field at `path` if it is a value, not a nested model; None if there is none."""
    current: type[BaseModel] | None = model
    field = None
    for part in path:
        if current is None or part not in current.model_fields:
            return None
        field = current.model_fields[part]
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            current = annotation
        else:
            current = None
    return field if current is None else None


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _set_nested(values: dict[str, Any], path: list[str], value: Any) -> None:
    target = values
    for part in path[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[path[-1]] = value


def _record(sources: dict[str, str], path: list[str], origin: str) -> None:
    """`origin` set the value at `path`; a level above keeps the source it already has."""
    sources[".".join(path)] = origin
    for depth in range(1, len(path)):
        sources.setdefault(".".join(path[:depth]), origin)


def _record_all(
    sources: dict[str, str], values: Mapping[Any, Any], above: tuple[str, ...], origin: str
) -> None:
    for key, value in values.items():
        path = (*above, str(key))
        _record(sources, list(path), origin)
        if isinstance(value, Mapping):
            _record_all(sources, value, path, origin)


def _origin(sources: Mapping[str, str], loc: Location) -> str | None:
    """Where the innermost part of `loc` that has a recorded source came from."""
    for depth in range(len(loc), 0, -1):
        found = sources.get(".".join(str(p) for p in loc[:depth]))
        if found:
            return found
    return None
