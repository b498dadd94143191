"""Who may read /metrics: bearer token -> TokenReview -> SubjectAccessReview, answers kept
briefly, and an API server that cannot answer is a 503 with the reason."""

import logging
import threading

import pytest

from tests.unit.device_plugin.test_session import Clock
from vgpu.adapters.fake.access_review import FakeAccessReview
from vgpu.app.metrics_guard import (
    ACCEPTED_TTL,
    MAX_ENTRIES,
    MAX_REVIEWS,
    REFUSED_TTL,
    MetricsGuard,
    Refusal,
)
from vgpu.ports.access_review import Identity, TokenVerdict

PROMETHEUS = Identity("system:serviceaccount:monitoring:prometheus", "u-1", ("system:authenticated",))
TENANT = Identity("system:serviceaccount:team-a:default", "u-2")


def _guard() -> tuple[MetricsGuard, FakeAccessReview, Clock]:
    reviews = FakeAccessReview(
        {"prom-token": PROMETHEUS, "tenant-token": TENANT},
        allowed=[(PROMETHEUS.username, "get", "/metrics")],
    )
    clock = Clock()
    return MetricsGuard(reviews, clock), reviews, clock


@pytest.mark.parametrize("header", [None, "", "Basic dXNlcjpwYXNz", "Bearer ", "Bearer"])
def test_no_bearer_token_is_401_and_asks_the_api_nothing(header: str | None) -> None:
    guard, reviews, _ = _guard()

    refusal = guard.check(header)

    assert refusal is not None and refusal.status == 401
    assert refusal.message.startswith("Unauthorized: /metrics needs a bearer token")
    assert refusal.headers["WWW-Authenticate"].startswith("Bearer")
    assert reviews.token_reviews == 0


def test_a_token_the_api_server_does_not_accept_is_401_with_its_reason() -> None:
    guard, _, _ = _guard()

    refusal = guard.check("Bearer forged")

    assert refusal is not None and refusal.status == 401
    assert refusal.message == (
        "Unauthorized: the API server does not accept this token (invalid bearer token)"
    )


def test_an_identity_without_get_metrics_is_403_naming_it() -> None:
    guard, _, _ = _guard()

    refusal = guard.check("Bearer tenant-token")

    assert refusal is not None and refusal.status == 403
    assert refusal.message.startswith(
        'Forbidden: user "system:serviceaccount:team-a:default" may not get /metrics'
    )


def test_an_allowed_identity_passes_and_is_not_asked_about_again_for_a_minute() -> None:
    guard, reviews, clock = _guard()

    assert guard.check("Bearer prom-token") is None
    clock.now += ACCEPTED_TTL - 1
    assert guard.check("bearer  prom-token ") is None
    assert (reviews.token_reviews, reviews.access_reviews) == (1, 1)

    clock.now += 1
    assert guard.check("Bearer prom-token") is None
    assert (reviews.token_reviews, reviews.access_reviews) == (2, 2)


def test_a_refusal_is_kept_only_briefly_so_a_new_binding_takes_effect_soon() -> None:
    guard, reviews, clock = _guard()
    assert guard.check("Bearer tenant-token") is not None

    reviews.allowed.add((TENANT.username, "get", "/metrics"))
    clock.now += REFUSED_TTL - 1
    assert guard.check("Bearer tenant-token") is not None
    clock.now += 1
    assert guard.check("Bearer tenant-token") is None


def test_an_api_server_that_cannot_answer_is_503_logged_once_and_never_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard, reviews, _ = _guard()
    reviews.down = True

    with caplog.at_level(logging.INFO, "vgpu.app.metrics_guard"):
        first = guard.check("Bearer prom-token")
        second = guard.check("Bearer prom-token")
        reviews.down = False
        third = guard.check("Bearer prom-token")

    assert first is not None and second is not None
    assert (first.status, first.headers["Retry-After"]) == (503, "10")
    assert first.message == (
        "cannot check who may read /metrics now: TokenReview failed: the fake API server is "
        "down; the scrape can be tried again"
    )
    assert third is None
    assert [r.getMessage() for r in caplog.records] == [
        "/metrics cannot be authorised: TokenReview failed: the fake API server is down",
        "/metrics scrapes are authorised again",
    ]


class _HeldReviews(FakeAccessReview):
    """Token reviews that wait for `release`, counting how many are under way at once."""

    def __init__(self) -> None:
        super().__init__({"prom-token": PROMETHEUS}, [(PROMETHEUS.username, "get", "/metrics")])
        self.release = threading.Event()
        self.under_way = 0
        self.most = 0
        self.changed = threading.Condition()

    def review_token(self, token: str) -> TokenVerdict:
        with self.changed:
            self.under_way += 1
            self.most = max(self.most, self.under_way)
            self.changed.notify_all()
        try:
            self.release.wait()
            return super().review_token(token)
        finally:
            with self.changed:
                self.under_way -= 1


def test_made_up_tokens_get_at_most_a_few_reviews_at_once_and_503_past_them() -> None:
    reviews = _HeldReviews()
    guard = MetricsGuard(reviews, Clock())
    reviews.release.set()
    assert guard.check("Bearer prom-token") is None  # Prometheus's answer is kept
    reviews.release.clear()
    answers: list[Refusal | None] = []
    threads = [
        threading.Thread(target=lambda i=i: answers.append(guard.check(f"Bearer made-up-{i}")))
        for i in range(MAX_REVIEWS)
    ]
    for thread in threads:
        thread.start()
    with reviews.changed:
        assert reviews.changed.wait_for(lambda: reviews.under_way == MAX_REVIEWS, timeout=10)

    past = guard.check("Bearer made-up-past")
    kept = guard.check("Bearer prom-token")  # needs no review: answered at once
    reviews.release.set()
    for thread in threads:
        thread.join()

    assert past is not None and past.status == 503 and past.headers["Retry-After"] == "1"
    assert "too many /metrics scrapes are being checked" in past.message
    assert kept is None and reviews.most == MAX_REVIEWS
    assert [a.status for a in answers if a is not None] == [401] * MAX_REVIEWS


def test_refused_tokens_never_push_an_accepted_one_out_of_the_cache() -> None:
    guard, reviews, _ = _guard()
    assert guard.check("Bearer prom-token") is None
    for i in range(2 * MAX_ENTRIES):
        assert guard.check(f"Bearer made-up-{i}") is not None
    before = reviews.token_reviews
    assert guard.check("Bearer prom-token") is None
    assert reviews.token_reviews == before
