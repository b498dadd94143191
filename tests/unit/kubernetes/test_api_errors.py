"""HTTP failures become the port's errors, carrying kube-apiserver's own message."""

import json

from vgpu.adapters.kubernetes.api import api_error
from vgpu.ports.cluster import ClusterError, Conflict, NotFound, Rejected


def _status(code: int, message: str) -> bytes:
    return json.dumps({"kind": "Status", "code": code, "message": message}).encode()


def test_404_is_not_found_and_409_is_conflict_with_the_api_message() -> None:
    missing = api_error("GET", "/api/v1/nodes/n1", 404, _status(404, 'nodes "n1" not found'))
    assert isinstance(missing, NotFound)
    assert str(missing) == 'GET /api/v1/nodes/n1: HTTP 404: nodes "n1" not found'
    stale = api_error("PATCH", "/api/v1/nodes/n1", 409, _status(409, "object has been modified"))
    assert isinstance(stale, Conflict) and "object has been modified" in str(stale)


def test_other_statuses_are_cluster_errors_and_a_body_that_is_not_json_is_quoted() -> None:
    error = api_error("POST", "/api/v1/namespaces/a/events", 500, b"upstream exploded")
    assert type(error) is ClusterError
    assert str(error) == "POST /api/v1/namespaces/a/events: HTTP 500: upstream exploded"
    assert "no message" in str(api_error("GET", "/x", 503, b""))


def test_a_clear_4xx_refusal_is_rejected_and_5xx_stays_ambiguous() -> None:
    refused = api_error("POST", "/api/v1/namespaces/a/pods/p/binding", 422, b"")
    assert isinstance(refused, Rejected)  # not applied: the caller may release what it held
    throttled = api_error("PATCH", "/api/v1/namespaces/a/pods/p", 429, b"")
    assert isinstance(throttled, Rejected)
    assert isinstance(api_error("GET", "/x", 404, b""), Rejected)
    assert not isinstance(api_error("POST", "/x", 504, b""), Rejected)  # may have been applied
