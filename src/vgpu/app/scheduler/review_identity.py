"""The apiVersion and `request.uid` of an AdmissionReview that could not be decoded.

kube-apiserver takes a reply whose uid is not its request's as a failed call and applies the
webhook's failurePolicy, so the webhook's own message is lost. A review can fail to decode for
reasons that have nothing to do with those two fields: a number too long for a double (orjson
and the standard library both refuse a 5000-digit one), nesting deeper than a parser follows, a
wrong type anywhere, bytes that are not UTF-8 further on, or a body over the size limit of which
only the first part was read. So the two fields are found by walking the top-level object, then
`request`, key by key, stepping over every other value without converting it or recursing into
it. kube-apiserver writes both in the first hundred bytes or so (Go writes struct fields in
order: kind, apiVersion, then request with uid first), so only the first WINDOW bytes are
walked: that bounds the work a hostile body can cause (stepping over 800 KiB of `[][][]...`
takes most of a second) without losing the uid of any review the API server sends.

>>> review_identity(b'{"apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u1","x":9e999')
('admission.k8s.io/v1beta1', 'u1')
>>> review_identity(b'not json')
('admission.k8s.io/v1', '')
"""

import json
import re

ADMISSION_V1 = "admission.k8s.io/v1"
ADMISSION_V1BETA1 = "admission.k8s.io/v1beta1"
WINDOW = 16 * 1024  # bytes of the body walked

_STRINGS = json.JSONDecoder(strict=False)  # only ever started on a '"': no recursion, no numbers
_SPACE = re.compile(r"[ \t\n\r]*")
_NESTING = re.compile(r'"|[\[{]+|[\]}]+')  # what moves the depth while stepping over a container
_SCALAR = re.compile(r"[^,:{}\[\]\s\"]+")  # a number, true, false or null, not checked further


def review_identity(body: bytes) -> tuple[str, str]:
    """(apiVersion, request.uid) as far as they can be read; v1 and "" when they cannot."""
    text = body[:WINDOW].decode("utf-8", "replace")
    version = _string_at(text, ("apiVersion",))
    uid = _string_at(text, ("request", "uid"))
    return (
        version if version in (ADMISSION_V1, ADMISSION_V1BETA1) else ADMISSION_V1,
        uid or "",
    )


def _string_at(text: str, path: tuple[str, ...]) -> str | None:
    """The string at `path` through nested objects, or None if it is not there or unreadable."""
    try:
        at: int | None = _skip_space(text, 0)
        for key in path:
            at = _member(text, at, key) if at is not None else None
        if at is None or text[at] != '"':
            return None
        return _string(text, at)[0]
    except (ValueError, IndexError):  # cut short or broken before the field was reached
        return None


def _member(text: str, at: int, key: str) -> int | None:
    """Where the value of `key` starts in the object at `at`; None if it has no such key."""
    if text[at] != "{":
        return None
    at = _skip_space(text, at + 1)
    while text[at] == '"':
        name, at = _string(text, at)
        at = _skip_space(text, at)
        if text[at] != ":":
            return None
        at = _skip_space(text, at + 1)
        if name == key:
            return at
        at = _skip_space(text, _past_value(text, at))
        if text[at] != ",":
            return None
        at = _skip_space(text, at + 1)
    return None


def _past_value(text: str, at: int) -> int:
    """The index just past the JSON value at `at`; ValueError or IndexError if it has no end."""
    if text[at] == '"':
        return _string(text, at)[1]
    if text[at] not in "[{":
        scalar = _SCALAR.match(text, at)
        if scalar is None:
            raise ValueError(f"no JSON value at character {at}")
        return scalar.end()
    depth = 0
    while True:
        found = _NESTING.search(text, at)
        if found is None:
            raise ValueError("a container is not closed")
        if found.group() == '"':
            at = _string(text, found.start())[1]
            continue
        run = len(found.group())
        if found.group()[0] in "[{":
            depth += run
        elif run >= depth:
            return found.start() + depth
        else:
            depth -= run
        at = found.end()


def _string(text: str, at: int) -> tuple[str, int]:
    """The JSON string starting at `at` (its opening quote) and the index just past it."""
    value, end = _STRINGS.raw_decode(text, at)
    if not isinstance(value, str):
        raise ValueError(f"no JSON string at character {at}")
    return value, end


def _skip_space(text: str, at: int) -> int:
    found = _SPACE.match(text, at)
    return found.end() if found is not None else at
