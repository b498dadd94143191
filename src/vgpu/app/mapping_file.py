"""Large YAML or JSON files holding a mapping, read fast (fake clusters, scenarios).

JSON text (it starts with `{`) goes to the standard JSON parser, everything else to libyaml's C
loader when PyYAML was built with it: a 1000-node fake cluster loads in well under a second
instead of minutes with the pure-Python loader. Errors name the source as `parse_yaml_mapping`
does, and the results are the same (JSON is YAML).
"""

import json
from pathlib import Path
from typing import Any

import yaml

from vgpu.app.errors import ConfigError
from vgpu.app.settings import read_text

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_mapping(text: str, source: str) -> dict[str, Any]:
    """YAML or JSON text holding a mapping, empty text as `{}`; ConfigError names `source`."""
    data = _json(text)
    if data is None:
        try:
            data = yaml.load(text, Loader=SafeLoader)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a YAML mapping, not {type(data).__name__}")
    return data


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML or JSON file holding a mapping; ConfigError names `what`, the file and the fault."""
    return parse_mapping(read_text(path, what), f"{what} {path}")


def _json(text: str) -> Any:
    """The JSON value, or None when the text is not JSON (YAML then decides)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except ValueError:  # a YAML flow mapping, or broken: YAML's error is the one to show
        return None
