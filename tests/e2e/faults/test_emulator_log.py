"""The emulator's bounded request log (long fault runs set it; kmock scans the whole log)."""

from tests.e2e.k8s_emulator import RunningApiServer, pod_manifest

PODS = "/api/v1/namespaces/default/pods"


def test_a_bounded_log_keeps_recent_requests_and_serves_as_before(
    k8s_api: RunningApiServer,
) -> None:
    k8s_api.emulator.request_log_limit = 3
    for i in range(12):
        k8s_api.create(PODS, pod_manifest("default", f"p{i}"))
    assert 3 <= len(list(k8s_api.emulator)) <= 7
    assert k8s_api.requests("POST")[-1].url.path == PODS
    assert len(k8s_api.list_items(PODS)) == 12


def test_by_default_every_request_is_kept(k8s_api: RunningApiServer) -> None:
    for i in range(12):
        k8s_api.create(PODS, pod_manifest("default", f"p{i}"))
    assert len(k8s_api.requests("POST", PODS)) == 12
