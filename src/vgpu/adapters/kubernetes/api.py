"""Plain-JSON calls to the Kubernetes API through the official client's `ApiClient`.

The client's configuration supplies the host, TLS and (refreshed) credentials; bodies and
answers stay plain dicts, so converting to domain objects needs no generated models, and a
call states its content type (merge patch) and reads raw answers (a Binding's Status).
"""

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from vgpu.ports.cluster import ClusterError, Conflict, NotFound, Rejected

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"

Query = Sequence[tuple[str, str]]


def api_error(method: str, path: str, status: int, body: bytes | str | None) -> ClusterError:
    """The port's error for an HTTP failure, carrying the API's own message when it sent one."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    message = text.strip()[:500] or "no message"
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping) and parsed.get("message"):
        message = str(parsed["message"])
    sentence = f"{method} {path}: HTTP {status}: {message}"
    if status == 404:
        return NotFound(sentence)
    if status == 409:
        return Conflict(sentence)
    if 400 <= status <= 499:
        return Rejected(sentence)
    return ClusterError(sentence)  # 5xx and the rest: the request may have been applied


def object_path(base: str, name: str) -> str:
    return f"{base}/{quote(name, safe='')}"


def namespaced(resource: str, namespace: str, group_version: str = "api/v1") -> str:
    return f"/{group_version}/namespaces/{quote(namespace, safe='')}/{resource}"


class KubeApi:
    """JSON requests with the official client; failures raise ClusterError, NotFound, Conflict."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 30.0) -> None:
        self._client = api_client
        self._timeout = timeout

    @property
    def host(self) -> str:
        return str(self._client.configuration.host)

    def get(self, path: str, query: Query = ()) -> dict[str, Any]:
        return self._json("GET", path, query=query)

    def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._json("POST", path, body=body)

    def put(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._json("PUT", path, body=body)

    def delete(self, path: str) -> dict[str, Any]:
        return self._json("DELETE", path)

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """RFC 7386 merge patch: maps merge, `None` deletes a key."""
        return self._json("PATCH", path, body=body, content_type=MERGE_PATCH)

    def open_stream(self, path: str, query: Query, read_timeout: float) -> urllib3.BaseHTTPResponse:
        """Start a streaming GET (a watch); the caller reads and closes the response."""
        response = self._send("GET", path, query, None, JSON, (self._timeout, read_timeout))
        if not 200 <= response.status <= 299:
            body = response.read()
            response.release_conn()
            raise api_error("GET", path, response.status, body)
        return response

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

    def _json(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        response = self._send(method, path, query, body, content_type, self._timeout)
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"{method} {path}: reading the answer failed: {exc}") from exc
        finally:
            response.release_conn()
        if not 200 <= response.status <= 299:
            raise api_error(method, path, response.status, data)
        if not data:
            return {}
        try:
            parsed = json.loads(data)
        except ValueError as exc:
            raise ClusterError(f"{method} {path}: answer is not JSON: {data[:200]!r}") from exc
        if not isinstance(parsed, dict):
            raise ClusterError(f"{method} {path}: answer is not a JSON object: {data[:200]!r}")
        return parsed

    def _send(
        self,
        method: str,
        path: str,
        query: Query,
        body: Mapping[str, Any] | None,
        content_type: str,
        timeout: float | tuple[float, float],
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": JSON, "Content-Type": content_type}
        try:
            serialized = self._client.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query) or None,
                header_params=headers,
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
            )
            rest_response = self._client.call_api(*serialized, _request_timeout=timeout)
        except ApiException as exc:  # TLS failures and requests the client cannot build
            if exc.status:
                raise api_error(method, path, int(exc.status), exc.body) from exc
            raise ClusterError(f"{method} {path}: {exc.reason}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterError(f"{method} {path}: cannot reach {self.host}: {exc}") from exc
        response: urllib3.BaseHTTPResponse = rest_response.response
        return response
