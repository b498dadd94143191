"""What a scraper gets from a `/metrics` listener with secure metrics on, against the API
emulator's TokenReview and SubjectAccessReview: shared by the scheduler's and the monitor's
e2e tests."""

import httpx

from tests.e2e.k8s_emulator import RunningApiServer

PROMETHEUS = "system:serviceaccount:monitoring:prometheus-k8s"
TENANT = "system:serviceaccount:team-a:default"


def assert_only_allowed_tokens_get_metrics(api: RunningApiServer, url: str) -> None:
    """Every answer a scraper can get from `url` (https://HOST:PORT), and the listener keeps
    serving through an API server that cannot review."""
    api.accept_token("prometheus-token", PROMETHEUS, ("system:serviceaccounts",))
    api.accept_token("prometheus-token-2", PROMETHEUS)
    api.accept_token("tenant-token", TENANT)
    api.allow(PROMETHEUS, "get", "/metrics")

    with httpx.Client(base_url=url, verify=False, timeout=15) as client:

        def scrape(token: str | None) -> httpx.Response:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return client.get("/metrics", headers=headers)

        anonymous = scrape(None)
        assert anonymous.status_code == 401, anonymous.text
        assert "needs a bearer token" in anonymous.text
        assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")

        forged = scrape("forged-token")
        assert forged.status_code == 401, forged.text
        assert "does not accept this token (invalid bearer token)" in forged.text

        tenant = scrape("tenant-token")
        assert tenant.status_code == 403, tenant.text
        assert f'user "{TENANT}" may not get /metrics' in tenant.text
        assert "# HELP" not in tenant.text

        allowed = scrape("prometheus-token")
        assert allowed.status_code == 200, allowed.text
        assert "# HELP" in allowed.text

        api.set_reviews_down(True)
        unreviewed = scrape("prometheus-token-2")  # not seen yet: it must be reviewed now
        assert unreviewed.status_code == 503, unreviewed.text
        assert "cannot check who may read /metrics now: TokenReview failed" in unreviewed.text
        assert "HTTP 503: the authenticator is unreachable" in unreviewed.text
        assert scrape("prometheus-token").status_code == 200  # reviewed a moment ago

        api.set_reviews_down(False)
        assert scrape("prometheus-token-2").status_code == 200

    plain = url.replace("https://", "http://")
    try:
        answer = httpx.get(f"{plain}/metrics", timeout=5)
    except httpx.TransportError:
        return  # the listener speaks TLS only
    assert answer.status_code == 400 or "# HELP" not in answer.text
