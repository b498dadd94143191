"""TokenReview and SubjectAccessReview through the API server: implements AccessReviewPort."""

from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient

from vgpu.adapters.kubernetes.api import KubeApi
from vgpu.ports.access_review import AccessVerdict, Identity, ReviewUnavailable, TokenVerdict
from vgpu.ports.cluster import ClusterError

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class KubernetesAccessReview:
    """Each review is one POST; its answer is not cached here (the caller caches)."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 5.0) -> None:
        self._api = KubeApi(api_client, timeout=timeout)

    def review_token(self, token: str) -> TokenVerdict:
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        status = self._status("TokenReview", TOKEN_REVIEWS, review)
        user = status.get("user")
        if status.get("authenticated") is not True or not isinstance(user, Mapping):
            return TokenVerdict(None, str(status.get("error") or ""))
        return TokenVerdict(_identity(user))

    def review_access(self, identity: Identity, verb: str, path: str) -> AccessVerdict:
        spec: dict[str, Any] = {
            "user": identity.username,
            "groups": list(identity.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if identity.uid:
            spec["uid"] = identity.uid
        if identity.extra:
            spec["extra"] = {key: list(values) for key, values in identity.extra}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        status = self._status("SubjectAccessReview", ACCESS_REVIEWS, review)
        allowed = status.get("allowed") is True and status.get("denied") is not True
        reason = status.get("reason") or status.get("evaluationError") or ""
        return AccessVerdict(allowed, str(reason))

    def _status(self, kind: str, path: str, review: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            answer = self._api.post(path, review)
        except ClusterError as exc:
            raise ReviewUnavailable(f"{kind} failed: {exc}") from exc
        status = answer.get("status")
        if not isinstance(status, Mapping):
            raise ReviewUnavailable(f"{kind} failed: the API server's answer has no status")
        return status


def _identity(user: Mapping[str, Any]) -> Identity:
    extra = user.get("extra")
    pairs = extra.items() if isinstance(extra, Mapping) else ()
    return Identity(
        username=str(user.get("username") or ""),
        uid=str(user.get("uid") or ""),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(v) for v in values or ())) for k, values in pairs)),
    )
