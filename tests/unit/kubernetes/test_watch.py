"""Reading watch streams: lines split anywhere across chunks, events, errors."""

import json

import pytest

from vgpu.adapters.kubernetes.watch import WatchError, WatchGone, iter_lines, parse_event


def _line(kind: str, obj: dict[str, object]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def test_lines_are_reassembled_whatever_the_chunk_borders() -> None:
    stream = _line("ADDED", {"a": 1}) + b"\n" + _line("DELETED", {"b": 2}) + b"\n\n"
    for cut in range(1, len(stream)):
        chunks = [stream[:cut], stream[cut:]]
        assert [json.loads(x)["type"] for x in iter_lines(chunks)] == ["ADDED", "DELETED"]


def test_a_last_line_without_newline_is_kept_and_blank_lines_dropped() -> None:
    assert list(iter_lines([b"\n  \n", b'{"x":1}'])) == [b'{"x":1}']


def test_an_event_carries_its_type_object_and_resource_version() -> None:
    event = parse_event(_line("MODIFIED", {"metadata": {"name": "n", "resourceVersion": "42"}}))
    assert (event.type, event.resource_version) == ("MODIFIED", "42")
    event.raise_if_error()  # not an error


def test_410_is_gone_and_other_errors_are_watch_errors() -> None:
    gone = parse_event(_line("ERROR", {"code": 410, "reason": "Expired", "message": "too old"}))
    with pytest.raises(WatchGone, match="too old"):
        gone.raise_if_error()
    broken = parse_event(_line("ERROR", {"code": 500, "message": "etcd down"}))
    with pytest.raises(WatchError, match="500: etcd down"):
        broken.raise_if_error()


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"{not json", "not JSON"),
        (b'{"type": "ADDED"}', "no object"),
        (b'["ADDED"]', "no object"),
        (b'{"type": "EXPLODED", "object": {}}', "unknown type 'EXPLODED'"),
    ],
)
def test_lines_that_are_not_events_are_named_in_the_error(line: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_event(line)
