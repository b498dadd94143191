"""`vgpu monitor --node-name NODE`: per-container GPU usage for Prometheus, beside the plugin."""

import argparse
import logging
from pathlib import Path
from typing import Any

from vgpu.app.monitor.config import ConfigError, MonitorConfig, load_config
from vgpu.app.monitor.container import MonitorContainer
from vgpu.app.node_agent import (
    add_node_agent_flags,
    cannot_start,
    run_node_agent,
    stop_on_signals,
    wait_for_driver,
)
from vgpu.app.plain_http import PlainHttpServer
from vgpu.ports.cluster import ClusterError
from vgpu.ports.gpu import GpuUnavailable

log = logging.getLogger("vgpu.monitor")

DESCRIPTION = """\
Run the vGPU monitor on one node. It reads the shared region HAMi-core keeps for every GPU
container (the cache files under <host dir>/<pod uid>_<container>/), matches each directory
to its pod through the API, and serves HAMi's monitor metrics on /metrics: host memory and
utilisation per card, and per container memory used and limit, utilisation and the time of
the last kernel. It removes the directories of pods that left the node, and tells HAMi-core
when a higher-priority task is active on a card (priority feedback).

Settings come from defaults < --config FILE < VGPU_* environment variables (VGPU_ plus the
setting name in capitals, e.g. VGPU_METRICS_LISTEN=:9394; NODE_NAME also sets the node) <
flags. See docs/monitor.md for every setting and the DaemonSet container.

Without a cluster or GPUs (to try it, or in tests): --fake-gpus FILE takes the host figures
from a YAML file and --fake-cluster FILE the node's pods.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "monitor",
        help="serve per-container GPU usage from HAMi-core's shared regions (port 9394)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_node_agent_flags(
        parser, "take the host GPU figures from this YAML file instead of NVML (development)"
    )
    add = parser.add_argument
    add(
        "--host-dir",
        type=Path,
        metavar="DIR",
        help="directory holding the <pod uid>_<container> cache directories "
        "(default /usr/local/vgpu/containers)",
    )
    add(
        "--claims-dir",
        type=Path,
        metavar="DIR",
        help="directory holding the DRA driver's <claim uid>/<share> directories "
        "(default /usr/local/vgpu/claims; a missing directory holds none)",
    )
    add(
        "--metrics-listen",
        metavar="[HOST]:PORT",
        help="where to serve /metrics (default :9394, all addresses)",
    )
    add(
        "--legacy-metrics",
        action="store_true",
        default=None,
        help="also emit HAMi's pre-v2.9 metric names",
    )
    add(
        "--priority-feedback",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="tell HAMi-core when a higher-priority task is active on a card (default on)",
    )
    add(
        "--secure-metrics",
        dest="secure_metrics.enabled",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve /metrics over HTTPS to bearer tokens allowed to get /metrics only "
        "(TokenReview + SubjectAccessReview; default off)",
    )
    parser.set_defaults(run=run)


_FLAGS = (  # beside the node agent's
    "host_dir",
    "claims_dir",
    "metrics_listen",
    "legacy_metrics",
    "priority_feedback",
    "secure_metrics.enabled",
)


def run(args: argparse.Namespace) -> int:
    return run_node_agent("vgpu monitor", load_config, args, _FLAGS, serve)


def serve(config: MonitorConfig, container: MonitorContainer | None = None) -> int:
    """Build everything from `config` and run until SIGTERM or SIGINT; the exit code. The
    metrics port serves from the start; the GPUs are waited for (`driver_wait`) behind it."""
    container = container or MonitorContainer(config=config)
    stop = stop_on_signals(log)
    server: PlainHttpServer | None = None
    try:
        try:
            server = container.server()
            server.start()
            log.info(
                "serving metrics on %s%s",
                server.url,
                " (bearer tokens allowed to get /metrics only)"
                if config.secure_metrics.enabled
                else "",
            )
            read = container.gpu_port().read_usage
            cards = wait_for_driver(config, read, stop, container.readiness().waiting)
            if cards is None:
                return 0
            daemon = container.daemon()
        except (ConfigError, GpuUnavailable, ClusterError, OSError, ValueError) as exc:
            return cannot_start("vgpu monitor", exc)
        container.readiness().ready()
        log.info(
            "node %s: %d GPU(s), reading %s and %s, priority feedback %s",
            config.node_name,
            len(cards),
            config.host_dir,
            config.claims_dir or "no claim directories",
            "on" if config.priority_feedback else "off",
        )
        try:
            daemon.run(stop)
        finally:
            container.accounting().close()
            container.gpu_port().close()
    finally:
        if server is not None:
            server.stop()
    return 0
