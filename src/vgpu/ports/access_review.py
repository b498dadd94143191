"""Who a bearer token belongs to and what that identity may do, asked of the API server.

`review_token` is a TokenReview (authentication.k8s.io/v1): the API server says whether it
accepts the token and whose it is. `review_access` is a SubjectAccessReview
(authorization.k8s.io/v1) for a non-resource URL: whether that identity may, say, `get`
`/metrics`. The secure metrics listeners ask both before they answer a scrape.
"""

from dataclasses import dataclass
from typing import Protocol


class ReviewUnavailable(RuntimeError):
    """The API server could not answer the review; the message says which review and why."""


@dataclass(frozen=True, slots=True)
class Identity:
    """A user as the API server authenticated it (`TokenReview.status.user`)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values), in key order


@dataclass(frozen=True, slots=True)
class TokenVerdict:
    """The identity the token belongs to, or None with the API server's reason for refusing."""

    identity: Identity | None
    error: str = ""


@dataclass(frozen=True, slots=True)
class AccessVerdict:
    allowed: bool
    reason: str = ""  # the authorizer's words, when it gave any


class AccessReviewPort(Protocol):
    def review_token(self, token: str) -> TokenVerdict:
        """Whose `token` is; ReviewUnavailable when the API server cannot say."""
        ...

    def review_access(self, identity: Identity, verb: str, path: str) -> AccessVerdict:
        """Whether `identity` may `verb` the non-resource URL `path`; ReviewUnavailable when
        the API server cannot say."""
        ...
