"""`vgpu scheduler`: serve the webhook and the kube-scheduler extender over HTTP(S)."""

import argparse
import logging
import os
import ssl
import sys
from pathlib import Path
from typing import Any

import uvicorn

from vgpu.app.scheduler.config import ConfigError, SchedulerConfig, load_config
from vgpu.app.scheduler.container import SchedulerContainer
from vgpu.app.scheduler.fake_mode import FakeClusterError
from vgpu.ports.cluster import ClusterError

log = logging.getLogger(__name__)

DESCRIPTION = """\
Run the GPU-sharing scheduler beside kube-scheduler, where HAMi's hami-scheduler runs:

  POST /webhook     mutating admission webhook (AdmissionReview v1 and v1beta1): sends GPU
                    pods to this scheduler, denies impossible ones (bad quantities, quota)
  POST /filter      kube-scheduler extender: picks the node and the exact GPU slices, reserves
                    them and writes HAMi's pod annotations (nodeCacheCapable: true)
  POST /prioritize  scores candidate nodes 0..10 (for combined scoring, see docs/scheduler.md)
  POST /bind        node lock, hami.io/bind-phase=allocating, then the Binding
  GET  /healthz, /readyz (ready once synced and leading), /metrics (Prometheus)
"""

EPILOG = """\
settings (lowest precedence first): defaults, --config FILE (YAML), VGPU_* environment
variables (nested fields with __, e.g. VGPU_LEADER_ELECTION__ENABLED=true,
VGPU_RESERVATION_TIMEOUT=120), then these flags. See docs/scheduler.md for every field.

examples:
  vgpu scheduler --config /etc/vgpu/scheduler.yaml --tls-cert tls.crt --tls-key tls.key \\
      --listen 0.0.0.0:443
  vgpu scheduler --fake-cluster cluster.yaml --listen 127.0.0.1:8080   # no cluster needed
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
        help="address to serve on (default 127.0.0.1:8080; in a pod use 0.0.0.0:443)",
    )
    parser.add_argument(
        "--tls-cert",
        type=Path,
        metavar="FILE",
        help="serve HTTPS with this certificate (PEM); needs --tls-key",
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
    if problem := _tls_problem(config):
        print(f"vgpu scheduler: {problem}", file=sys.stderr)
        return 2
    container = SchedulerContainer(config=config, fake_cluster_file=args.fake_cluster)
    try:
        app = container.app()
    except (FakeClusterError, ClusterError) as exc:
        print(f"vgpu scheduler: {exc}", file=sys.stderr)
        return 2
    mode = f"fake cluster {args.fake_cluster}" if args.fake_cluster else "Kubernetes"
    scheme = "https" if config.tls_cert else "http"
    log.info(
        "vgpu scheduler %r on %s, serving %s://%s:%d",
        config.scheduler_name,
        mode,
        scheme,
        config.listen_address,
        config.listen_port,
    )
    uvicorn.run(
        app,
        host=config.listen_address,
        port=config.listen_port,
        ssl_certfile=str(config.tls_cert) if config.tls_cert else None,
        ssl_keyfile=str(config.tls_key) if config.tls_key else None,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "kubeconfig": args.kubeconfig,
    }
    if args.listen:
        host, sep, port = args.listen.rpartition(":")
        if not sep:
            host, port = args.listen, ""
        overrides["listen_address"] = host.strip("[]") or "0.0.0.0"
        overrides["listen_port"] = port or None
    return overrides


def _tls_problem(config: SchedulerConfig) -> str:
    if config.tls_cert is None or config.tls_key is None:
        return ""
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            config.tls_cert, config.tls_key
        )
    except (OSError, ssl.SSLError) as exc:
        return f"cannot use TLS certificate {config.tls_cert} / key {config.tls_key}: {exc}"
    return ""
