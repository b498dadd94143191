"""`vgpu scheduler`: serve the webhook, the kube-scheduler extender and metrics over HTTP(S)."""

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vgpu.app.fake_mode import FakeClusterError
from vgpu.app.scheduler.config import ConfigError, SchedulerConfig, load_config
from vgpu.app.scheduler.container import SchedulerContainer
from vgpu.app.scheduler.listeners import ListenError, serve
from vgpu.app.scheduler.tls import TlsError, WebhookTls
from vgpu.app.secure_metrics import SecureMetricsError
from vgpu.ports.cluster import ClusterError

log = logging.getLogger(__name__)

DESCRIPTION = """\
Run the GPU-sharing scheduler beside kube-scheduler, where HAMi's hami-scheduler runs.
It serves four listeners:

  webhook (--listen, HTTPS with --tls-cert/--tls-key):
    POST /webhook     mutating admission webhook (AdmissionReview v1 and v1beta1): sends GPU
                      pods to this scheduler, denies impossible ones (bad quantities, quota)
    GET  /healthz, /readyz (ready once synced and leading)
  extender (--extender-listen, default 127.0.0.1:8888; kube-scheduler as a sidecar):
    POST /filter      picks the node and the exact GPU slices, reserves them and writes
                      HAMi's pod annotations (nodeCacheCapable: true)
    POST /prioritize  scores candidate nodes 0..10 (for combined scoring, see docs/scheduler.md)
    POST /bind        node lock, hami.io/bind-phase=allocating, then the Binding
    POST /preempt     keeps the proposed victims whose GPU slices must go (preemptVerb)
    GET  /healthz
    Off loopback it needs mutual TLS: extender.tls_cert, extender.tls_key, extender.client_ca.
  metrics (--metrics-listen, default 0.0.0.0:9395):
    GET  /metrics     Prometheus; with --secure-metrics over HTTPS, and only for a bearer
                      token whose identity may get /metrics (TokenReview, SubjectAccessReview)
  explain (--explain-listen, default 127.0.0.1:9396; kubectl port-forward reaches it):
    GET  /explain/NAMESPACE/NAME   the last decision on a pod, explained (JSON); it tells
                      any namespace's requests and cards, so off loopback it needs
                      explain.expose: true
SIGHUP reads the webhook's certificate and key files again (new handshakes use them).
"""

EPILOG = """\
settings (lowest precedence first): defaults, --config FILE (YAML), VGPU_* environment
variables (nested fields with __, e.g. VGPU_LEADER_ELECTION__ENABLED=true,
VGPU_EXTENDER__PORT=8888), then these flags. See docs/scheduler.md for every field.

examples:
  vgpu scheduler --config /etc/vgpu/scheduler.yaml --tls-cert tls.crt --tls-key tls.key \\
      --listen 0.0.0.0:443
  vgpu scheduler --fake-cluster examples/fake-cluster.yaml   # no cluster needed
"""


def register(subparsers: Any) -> None:
    """Add the `scheduler` sub-command."""
    parser = subparsers.add_parser(
        "scheduler",
        help="serve the admission webhook and the kube-scheduler extender",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="YAML settings file")
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="webhook and health address (default 127.0.0.1:8080; in a pod use 0.0.0.0:443)",
    )
    parser.add_argument(
        "--extender-listen",
        metavar="HOST:PORT",
        help="extender verbs address (default 127.0.0.1:8888; off loopback needs mutual TLS)",
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="Prometheus /metrics address (default 0.0.0.0:9395)",
    )
    parser.add_argument(
        "--secure-metrics",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve /metrics over HTTPS to bearer tokens allowed to get /metrics only "
        "(TokenReview + SubjectAccessReview; default off)",
    )
    parser.add_argument(
        "--explain-listen",
        metavar="HOST:PORT",
        help="GET /explain address (default 127.0.0.1:9396; off loopback needs explain.expose)",
    )
    parser.add_argument(
        "--tls-cert",
        type=Path,
        metavar="FILE",
        help="serve the webhook over HTTPS with this certificate (PEM); needs --tls-key",
    )
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="private key of --tls-cert")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="kubeconfig to reach the API server (default: in-cluster, else ~/.kube/config)",
    )
    parser.add_argument(
        "--fake-cluster",
        type=Path,
        metavar="FILE",
        help="run on an in-memory cluster described by this YAML file instead of Kubernetes",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config, os.environ, _overrides(args))
    except ConfigError as exc:
        print(f"vgpu scheduler: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    container = SchedulerContainer(config=config, fake_cluster_file=args.fake_cluster)
    try:
        container.webhook_tls()  # certificates first: a bad file is reported before the
        container.extender_tls()  # cluster is even contacted
        listeners = container.listeners()
    except (TlsError, FakeClusterError, ClusterError, SecureMetricsError) as exc:
        print(f"vgpu scheduler: {exc}", file=sys.stderr)
        return 2
    mode = f"fake cluster {args.fake_cluster}" if args.fake_cluster else "Kubernetes"
    log.info("vgpu scheduler %r on %s", config.scheduler_name, mode)
    lifetime = container.lifetime()
    try:
        serve(listeners, lifetime.start, lifetime.stop, _reloader(config, container.webhook_tls()))
    except ListenError as exc:
        print(f"vgpu scheduler: {exc}", file=sys.stderr)
        return 2
    return 0


def _reloader(config: SchedulerConfig, tls: WebhookTls | None) -> Callable[[], None] | None:
    """On SIGHUP, read the webhook's certificate files again (they may have been rotated)."""
    if tls is None or config.tls_cert is None or config.tls_key is None:
        return None
    cert, key = config.tls_cert, config.tls_key

    def reload() -> None:
        try:
            tls.reload(cert, key)
        except TlsError as exc:
            log.error("webhook certificate not reloaded, the old one stays in use: %s", exc)
            return
        log.info("webhook certificate reloaded from %s", cert)

    return reload


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "kubeconfig": args.kubeconfig,
        "metrics.secure.enabled": args.secure_metrics,
    }
    for flag, address, port in (
        (args.listen, "listen_address", "listen_port"),
        (args.extender_listen, "extender.address", "extender.port"),
        (args.metrics_listen, "metrics.address", "metrics.port"),
        (args.explain_listen, "explain.address", "explain.port"),
    ):
        if flag:
            overrides[address], overrides[port] = _host_port(flag)
    return overrides


def _host_port(value: str) -> tuple[str, str | None]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = value, ""
    return host.strip("[]") or "0.0.0.0", port or None
