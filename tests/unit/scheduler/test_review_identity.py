"""The uid of a review the webhook cannot decode is still found, as a JSON parser would find it,
without converting numbers or following nesting, and in bounded work."""

import doctest
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.app.scheduler import review_identity as module
from vgpu.app.scheduler.review_identity import WINDOW, review_identity

V1, V1BETA1 = "admission.k8s.io/v1", "admission.k8s.io/v1beta1"

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
names = st.text(max_size=6).filter(lambda k: k not in ("uid", "apiVersion", "request"))
members = st.dictionaries(names, values, max_size=3)


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(module).failed == 0


@settings(max_examples=100, deadline=None)
@given(
    st.text(max_size=40),
    st.sampled_from([V1, V1BETA1]),
    members,
    members,
    members,
    st.booleans(),
    st.sampled_from([None, 2]),
)
def test_in_any_valid_review_the_uid_and_version_are_what_a_parser_reads(
    uid: str,
    version: str,
    outside: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    ascii_only: bool,
    indent: int | None,
) -> None:
    document = {**outside, "apiVersion": version, "request": {**before, "uid": uid, **after}}
    body = json.dumps(document, ensure_ascii=ascii_only, indent=indent).encode()
    assert review_identity(body) == (version, uid)


def test_a_uid_behind_more_than_the_window_is_not_looked_for() -> None:
    """The walk is bounded; the API server writes the uid within its first hundred bytes."""
    padding = "[]," * WINDOW
    body = f'{{"apiVersion": "{V1BETA1}", "request": {{"x": [{padding} 1], "uid": "late"}}}}'
    assert review_identity(body.encode()) == (V1BETA1, "")


def test_an_unknown_version_or_a_uid_that_is_no_string_reads_as_v1_and_empty() -> None:
    body = b'{"apiVersion": "admission.k8s.io/v2", "request": {"uid": 42}}'
    assert review_identity(body) == (V1, "")
