"""Who may read `/metrics` when it is served securely: the Kubernetes way.

As controller-runtime's secure metrics serving does, a scrape must carry a bearer token; the API
server says whose it is (TokenReview) and whether that identity may `get` the non-resource URL
`/metrics` (SubjectAccessReview), which RBAC grants with a ClusterRole rule
`nonResourceURLs: ["/metrics"], verbs: ["get"]`. Answers are kept briefly so that a scrape every
few seconds costs no API call: an accepted token or an allowed identity for a minute (so a token
revoked, or a binding removed, still reads the metrics for up to a minute), a refusal for ten
seconds (so a binding just added takes effect soon). Refusals are kept apart from acceptances,
so made-up tokens cannot push Prometheus's answer out. A review the API server cannot answer is
never kept: the scrape gets 503 with the reason, and the reason is logged once until it changes.

Whoever reaches the port can send made-up tokens, each a TokenReview: at most `MAX_REVIEWS` are
under way at once, and a scrape that would need one more gets 503 at once (a scrape whose answer
is kept needs none), so a flood of them neither piles up threads nor floods the API server.

`check` gives None when the scrape may go on, else the refusal to send: 401 without a token or
with one the API server does not accept, 403 when the identity may not get `/metrics`.
"""

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from vgpu.ports.access_review import (
    AccessReviewPort,
    AccessVerdict,
    Identity,
    ReviewUnavailable,
    TokenVerdict,
)

log = logging.getLogger(__name__)

PATH = "/metrics"
VERB = "get"
ACCEPTED_TTL = 60.0
REFUSED_TTL = 10.0
MAX_ENTRIES = 1024
MAX_REVIEWS = 4  # API reviews under way at once, over every scrape
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="vgpu metrics"'}

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Refusal:
    """What to answer instead of the metrics."""

    status: int
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


class MetricsGuard:
    """Thread-safe; `check` may call the API server (up to two reviews), so it runs off any
    event loop."""

    def __init__(
        self, reviews: AccessReviewPort, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._reviews = reviews
        self._accepted: _Expiring[str, TokenVerdict] = _Expiring(clock)
        self._refused: _Expiring[str, TokenVerdict] = _Expiring(clock)
        self._access: _Expiring[Identity, AccessVerdict] = _Expiring(clock)
        self._reviewing = threading.BoundedSemaphore(MAX_REVIEWS)
        self._fault = ""
        self._fault_lock = threading.Lock()

    def check(self, authorization: str | None) -> Refusal | None:
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Refusal(
                401,
                f"Unauthorized: {PATH} needs a bearer token (Authorization: Bearer <token>) of "
                f"an identity allowed to {VERB} {PATH}",
                _CHALLENGE,
            )
        try:
            who = self._token(token)
            if who.identity is None:
                why = f" ({who.error})" if who.error else ""
                return Refusal(
                    401, f"Unauthorized: the API server does not accept this token{why}", _CHALLENGE
                )
            verdict = self._allowed(who.identity)
        except ReviewUnavailable as exc:
            self._report(str(exc))
            return Refusal(
                503,
                f"cannot check who may read {PATH} now: {exc}; the scrape can be tried again",
                {"Retry-After": "10"},
            )
        except _Busy:
            return Refusal(
                503,
                f"too many {PATH} scrapes are being checked with the API server at once "
                f"({MAX_REVIEWS}); the scrape can be tried again",
                {"Retry-After": "1"},
            )
        self._report("")
        if not verdict.allowed:
            why = f" ({verdict.reason})" if verdict.reason else ""
            return Refusal(
                403,
                f'Forbidden: user "{who.identity.username}" may not {VERB} {PATH}{why}; bind it '
                "to a ClusterRole with nonResourceURLs [/metrics], verbs [get]",
            )
        return None

    def _token(self, token: str) -> TokenVerdict:
        key = hashlib.sha256(token.encode()).hexdigest()  # the cache never holds a token
        found = self._accepted.get(key) or self._refused.get(key)
        if found is None:
            with self._review():
                found = self._reviews.review_token(token)
            if found.identity:
                self._accepted.put(key, found, ACCEPTED_TTL)
            else:
                self._refused.put(key, found, REFUSED_TTL)
        return found

    def _allowed(self, identity: Identity) -> AccessVerdict:
        found = self._access.get(identity)
        if found is None:
            with self._review():
                found = self._reviews.review_access(identity, VERB, PATH)
            self._access.put(identity, found, ACCEPTED_TTL if found.allowed else REFUSED_TTL)
        return found

    @contextmanager
    def _review(self) -> Iterator[None]:
        """A place among the reviews under way; _Busy when all `MAX_REVIEWS` are taken."""
        if not self._reviewing.acquire(blocking=False):
            raise _Busy
        try:
            yield
        finally:
            self._reviewing.release()

    def _report(self, fault: str) -> None:
        with self._fault_lock:
            if fault == self._fault:
                return
            self._fault = fault
        if fault:
            log.error("%s cannot be authorised: %s", PATH, fault)
        else:
            log.info("%s scrapes are authorised again", PATH)


class _Busy(Exception):
    """Every place for a review is taken."""


class _Expiring(Generic[K, V]):
    """At most MAX_ENTRIES answers, each until its own deadline; the oldest go first."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)
