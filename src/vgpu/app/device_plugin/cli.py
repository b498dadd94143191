"""`vgpu device-plugin --node-name NODE`: the per-node daemon the kubelet talks to."""

import argparse
import logging
import threading
from pathlib import Path
from typing import Any

from vgpu.app.device_plugin.config import ConfigError, DevicePluginConfig, load_config
from vgpu.app.device_plugin.container import DevicePluginContainer
from vgpu.app.node_agent import (
    add_node_agent_flags,
    cannot_start,
    run_node_agent,
    stop_on_signals,
    wait_for_driver,
)
from vgpu.ports.cluster import ClusterError
from vgpu.ports.gpu import GpuUnavailable
from vgpu.ports.kubelet import KubeletError

log = logging.getLogger("vgpu.device_plugin")

DESCRIPTION = """\
Run the vgpu device plugin on one node. It lists every GPU to the kubelet as split-count
shareable replicas of the resource (nvidia.com/gpu), publishes the GPUs in the node
annotation hami.io/node-nvidia-register for the scheduler, and on each Allocate reads the
scheduler's grants from the pod, serves them only when the scheduler's signature verifies (key
ring in the Secret vgpu-system/vgpu-grant-keys) and they fit the node's own ledger, records what
it served under --state-dir before it answers with HAMi-core's environment and mounts, and
counts that until the pod ends, whatever the pod's annotations say later.

Settings come from defaults < --config FILE < VGPU_* environment variables (VGPU_ plus the
setting name in capitals, e.g. VGPU_SPLIT_COUNT=4; NODE_NAME also sets the node) < flags.
See docs/device-plugin.md for every setting and the DaemonSet.

Without a cluster or GPUs (to try it, or in tests): --fake-gpus FILE takes the GPUs from a
YAML file and --fake-cluster FILE keeps the node and its pods in memory. The plugin then serves
its socket in --plugin-dir and registers as soon as a kubelet.sock appears there.
"""

EPILOG = """\
example, on a machine without GPUs or Kubernetes:
  vgpu device-plugin --node-name node1 --fake-gpus examples/fake-gpus.yaml \\
      --fake-cluster examples/fake-cluster.yaml --plugin-dir /tmp
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "device-plugin",
        help="run the per-node device plugin (kubelet gRPC + node registration)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_node_agent_flags(
        parser, "take the GPUs from this YAML file instead of NVML (development and tests)"
    )
    add = parser.add_argument
    add(
        "--plugin-dir",
        type=Path,
        metavar="DIR",
        help="the kubelet's device-plugin directory holding kubelet.sock "
        "(default /var/lib/kubelet/device-plugins)",
    )
    add(
        "--node-config",
        type=Path,
        metavar="FILE",
        dest="node_config_file",
        help="JSON file shaped like HAMi's nodeconfig: per-node split count, scaling and "
        "device filters",
    )
    add("--resource-name", metavar="NAME", help="resource to register (default nvidia.com/gpu)")
    add("--split-count", type=int, metavar="N", help="replicas (shares) per GPU (default 10)")
    add(
        "--memory-scaling",
        type=float,
        metavar="X",
        help="register X times each GPU's memory; above 1 oversubscribes (default 1)",
    )
    add("--core-scaling", type=float, metavar="X", help="register X x 100%% cores (default 1)")
    add(
        "--hook-path",
        metavar="DIR",
        help="host dir holding vgpu/libvgpu.so, mounted at the same path (default /usr/local)",
    )
    add(
        "--disable-core-limit",
        action="store_true",
        default=None,
        help="tell HAMi-core not to limit SM utilisation (GPU_CORE_UTILIZATION_POLICY=disable)",
    )
    add(
        "--health-listen",
        metavar="[HOST]:PORT",
        help="where to serve /healthz and /readyz for the kubelet's probes (default :9397; "
        "empty: nowhere)",
    )
    add(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="host dir where the plugin records what it served, kept across restarts "
        "(default /var/lib/vgpu)",
    )
    parser.set_defaults(run=run)


_FLAGS = (  # beside the node agent's
    "plugin_dir",
    "node_config_file",
    "resource_name",
    "split_count",
    "memory_scaling",
    "core_scaling",
    "hook_path",
    "disable_core_limit",
    "state_dir",
    "health_listen",
)


def run(args: argparse.Namespace) -> int:
    return run_node_agent("vgpu device-plugin", load_config, args, _FLAGS, serve)


def serve(
    config: DevicePluginConfig,
    container: DevicePluginContainer | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Build everything from `config` and run until SIGTERM or SIGINT (or `stop` is set, for an
    embedder running it on another thread); the exit code. The health endpoint serves from the
    start; the NVIDIA driver is waited for (`driver_wait`) behind it, and the plugin is ready
    once registered with the kubelet."""
    container = container or DevicePluginContainer(config=config)
    log.info(
        "starting on node %s: resource %s, split count %d, plugin dir %s",
        config.node_name,
        config.resource_name,
        config.split_count,
        config.plugin_dir,
    )
    stop = stop or stop_on_signals(log)
    probes = container.probes()
    try:
        server = container.probe_server()
    except OSError as exc:
        why = f"cannot serve /healthz on {config.health_listen}: {exc.strerror or exc}"
        return cannot_start("vgpu device-plugin", RuntimeError(why))
    if server is not None:
        server.start()
        log.info("serving /healthz and /readyz on %s", server.url)
    try:
        try:
            gpus = wait_for_driver(config, container.gpu_port().discover, stop, probes.waiting)
            if gpus is None:
                return 0
            probes.waiting("starting: GPUs found, connecting to the API server")
            daemon = container.daemon()
        except (ConfigError, GpuUnavailable, ClusterError, KubeletError, ValueError) as exc:
            return cannot_start("vgpu device-plugin", exc)
        daemon.run(stop)
    finally:
        if server is not None:
            server.stop()
    return 0
