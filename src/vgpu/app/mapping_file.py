"""Large YAML or JSON files holding a mapping, read fast (fake clusters, scenarios).

JSON text (it starts with `{`) goes to the standard JSON parser, everything else to libyaml's C
loader when PyYAML was built with it: a 1000-node fake cluster loads in well under a second
instead of minutes with the pure-Python loader. Errors name the source as `parse_yaml_mapping`
does, and the results are the same (JSON is YAML).
"""

import json
from collections.abc import Iterator
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


def read_mapping_streaming(path: Path, what: str, key: str) -> tuple[dict[str, Any], Iterator[Any]]:
    """Like `read_mapping`, but the list under `key` comes apart: its items are decoded one at
    a time as the iterator is walked (JSON files; YAML files are read whole). A file of tens of
    thousands of pods then never exists as one decoded tree, whose peak the process's memory
    would keep. The list is left out of the mapping; a `key` that is not a list stays in it."""
    text = read_text(path, what)
    source = f"{what} {path}"
    offsets = _json_list_items(text, key) if text.lstrip().startswith("{") else None
    if offsets is None:
        data = parse_mapping(text, source)
        items = data.pop(key) if isinstance(data.get(key), list) else []
        return data, iter(items)
    start, end, positions = offsets
    data = parse_mapping(text[:start] + "[]" + text[end:], source)
    data.pop(key)
    return data, (_DECODER.raw_decode(text, p)[0] for p in positions)


_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def _json_list_items(text: str, key: str) -> tuple[int, int, list[int]] | None:
    """Where the top-level member `key`'s list starts and ends, and where each item starts;
    None when the text is not a JSON object or `key` holds no list (parse it whole then)."""
    try:
        at = _skip(text, text.index("{") + 1)
        while text[at] != "}":
            name, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            if text[at] != ":":
                return None
            at = _skip(text, at + 1)
            if name == key and text[at] == "[":
                return _list_items(text, at)
            _, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            at = _skip(text, at + 1) if text[at] == "," else at
        return None
    except (ValueError, IndexError):  # not JSON after all: the whole parse says why
        return None


def _list_items(text: str, start: int) -> tuple[int, int, list[int]] | None:
    positions = []
    at = _skip(text, start + 1)
    while text[at] != "]":
        positions.append(at)
        _, at = _DECODER.raw_decode(text, at)  # decoded to find its end, then let go
        at = _skip(text, at)
        if text[at] == ",":
            at = _skip(text, at + 1)
        elif text[at] != "]":
            return None
    return start, at + 1, positions


def _skip(text: str, at: int) -> int:
    while text[at] in _SPACE:
        at += 1
    return at
