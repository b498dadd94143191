"""`vgpu scheduler --secure-metrics`: /metrics over HTTPS, for allowed bearer tokens only."""

from pathlib import Path

from tests.e2e.k8s_emulator import RunningApiServer
from tests.e2e.scheduler.conftest import Launch
from tests.e2e.scheduler.harness import wait_until
from tests.e2e.secure_metrics import assert_only_allowed_tokens_get_metrics


def test_metrics_answer_only_tokens_allowed_to_get_them(
    k8s_api: RunningApiServer, launch: Launch, tmp_path: Path
) -> None:
    kubeconfig = k8s_api.kubeconfig(tmp_path / "kubeconfig")
    scheduler = launch("--kubeconfig", str(kubeconfig), "--secure-metrics")

    assert_only_allowed_tokens_get_metrics(k8s_api, f"https://127.0.0.1:{scheduler.metrics_port}")

    assert scheduler.alive()
    assert "/metrics cannot be authorised: TokenReview failed" in scheduler.logs()


def test_secure_metrics_without_an_api_server_stop_the_scheduler_with_the_reason(
    launch: Launch,
) -> None:
    fake = Path(__file__).resolve().parents[3] / "examples" / "fake-cluster.yaml"
    scheduler = launch("--fake-cluster", str(fake), "--secure-metrics", ready=False)

    assert wait_until(lambda: not scheduler.alive(), 30)
    assert scheduler.stop() == 2
    assert "with --fake-cluster there is none: turn them off" in scheduler.logs()
