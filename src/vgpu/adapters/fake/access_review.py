"""An in-memory AccessReviewPort: known tokens, the (user, verb, path) triples allowed, and a
switch that makes every review fail as an unreachable API server would."""

import threading
from collections.abc import Iterable, Mapping

from vgpu.ports.access_review import AccessVerdict, Identity, ReviewUnavailable, TokenVerdict


class FakeAccessReview:
    def __init__(
        self,
        tokens: Mapping[str, Identity] | None = None,
        allowed: Iterable[tuple[str, str, str]] = (),
    ) -> None:
        self.tokens = dict(tokens or {})
        self.allowed = set(allowed)  # (username, verb, path)
        self.down = False
        self.token_reviews = 0
        self.access_reviews = 0
        self._lock = threading.Lock()

    def review_token(self, token: str) -> TokenVerdict:
        with self._lock:
            self.token_reviews += 1
            self._check_up("TokenReview")
            identity = self.tokens.get(token)
        if identity is None:
            return TokenVerdict(None, "invalid bearer token")
        return TokenVerdict(identity)

    def review_access(self, identity: Identity, verb: str, path: str) -> AccessVerdict:
        with self._lock:
            self.access_reviews += 1
            self._check_up("SubjectAccessReview")
            if (identity.username, verb, path) in self.allowed:
                return AccessVerdict(True, "allowed by the fake")
        return AccessVerdict(False, "")

    def _check_up(self, kind: str) -> None:
        if self.down:
            raise ReviewUnavailable(f"{kind} failed: the fake API server is down")
