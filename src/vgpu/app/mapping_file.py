"""A large YAML or JSON mapping file whose big list is decoded one item at a time (fake
clusters with tens of thousands of pods), so that the whole decoded tree never exists at once:
the process's resident memory keeps whatever its peak took."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vgpu.app.settings import parse_yaml_mapping, read_text


def read_mapping_streaming(path: Path, what: str, key: str) -> tuple[dict[str, Any], Iterator[Any]]:
    """Like `read_yaml_mapping`, but the list under `key` comes apart: its items are decoded one at
    a time as the iterator is walked (JSON files; YAML files are read whole). A file of tens of
    thousands of pods then never exists as one decoded tree, whose peak the process's memory
    would keep. The list is left out of the mapping; a `key` that is not a list stays in it."""
    text = read_text(path, what)
    source = f"{what} {path}"
    offsets = _json_list_items(text, key) if text.lstrip().startswith("{") else None
    if offsets is None:
        data = parse_yaml_mapping(text, source)
        items = data.pop(key) if isinstance(data.get(key), list) else []
        return data, iter(items)
    start, end, positions = offsets
    data = parse_yaml_mapping(text[:start] + "[]" + text[end:], source)
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
