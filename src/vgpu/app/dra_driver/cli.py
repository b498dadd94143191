"""`vgpu dra-driver --node-name NODE`: the per-node kubelet DRA plugin."""

import argparse
import logging
from pathlib import Path
from typing import Any

from vgpu.app.dra_driver.config import ConfigError, DraDriverConfig, load_config
from vgpu.app.dra_driver.container import DraDriverContainer
from vgpu.app.node_agent import add_node_agent_flags, cannot_start, run_node_agent, stop_on_signals
from vgpu.ports.cluster import ClusterError
from vgpu.ports.dra import DraKubeletError, HostFileError
from vgpu.ports.gpu import GpuUnavailable

log = logging.getLogger("vgpu.dra_driver")

DESCRIPTION = """\
Run the vgpu DRA driver on one node: the kubelet's Dynamic Resource Allocation plugin for
memory and compute slices of the node's GPUs (Kubernetes 1.34 or newer; consumable capacity,
gate DRAConsumableCapacity, on by default from 1.36).

It publishes one ResourceSlice for the node (driver gpu.vgpu.io, pool named after the node, one
shared device gpu-<index> per healthy GPU with the capacities memory and cores), registers with
the kubelet through its plugin registry, and on each NodePrepareResources reads the claim,
checks it was allocated to this node, checks the node's own count of every GPU (the claims it
prepared and the pods the device plugin still serves here), and writes a CDI spec per claim
with HAMi-core's limits before it answers. What it prepared is recorded under --state-dir, so
a restart keeps counting it.

Settings come from defaults < --config FILE < VGPU_* environment variables (VGPU_ plus the
setting name in capitals, e.g. VGPU_DRIVER_NAME; NODE_NAME also sets the node) < flags.
See docs/dra-driver.md for every setting and what goes into a container.
"""

EPILOG = """\
example, on a machine without GPUs or Kubernetes (serves its sockets in /tmp/dra):
  vgpu dra-driver --node-name node1 --fake-gpus examples/fake-gpus.yaml \\
      --fake-cluster examples/fake-cluster.yaml --registry-dir /tmp/dra/registry \\
      --plugin-dir /tmp/dra/plugin --cdi-dir /tmp/dra/cdi --state-dir /tmp/dra/state \\
      --hook-path /tmp/dra/hook
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dra-driver",
        help="run the per-node kubelet DRA plugin (ResourceSlices + CDI specs with HAMi-core)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_node_agent_flags(
        parser, "take the GPUs from this YAML file instead of NVML (development and tests)"
    )
    add = parser.add_argument
    add("--driver-name", metavar="NAME", help="the DRA driver's name (default gpu.vgpu.io)")
    add(
        "--registry-dir",
        type=Path,
        metavar="DIR",
        help="the kubelet's plugin registry (default /var/lib/kubelet/plugins_registry)",
    )
    add(
        "--plugin-dir",
        type=Path,
        metavar="DIR",
        help="where dra.sock is served (default /var/lib/kubelet/plugins/<driver name>)",
    )
    add(
        "--cdi-dir",
        type=Path,
        metavar="DIR",
        help="where the per-claim CDI specs are written (default /var/run/cdi)",
    )
    add(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="host dir of the prepared-claims record and the device plugin's served record "
        "(default /var/lib/vgpu)",
    )
    add(
        "--hook-path",
        metavar="DIR",
        help="host dir holding vgpu/libvgpu.so; claim dirs go in vgpu/claims (default "
        "/usr/local)",
    )
    add(
        "--gpu-visibility",
        choices=["auto", "cdi", "env"],
        help="how a claim's GPUs are made visible: NVIDIA's CDI devices, NVIDIA_VISIBLE_DEVICES, "
        "or the first where NVIDIA's CDI spec exists (default auto)",
    )
    add(
        "--disable-core-limit",
        action="store_true",
        default=None,
        help="tell HAMi-core not to limit SM utilisation (GPU_CORE_UTILIZATION_POLICY=disable)",
    )
    parser.set_defaults(run=run)


_FLAGS = (  # beside the node agent's
    "driver_name",
    "registry_dir",
    "plugin_dir",
    "cdi_dir",
    "state_dir",
    "hook_path",
    "gpu_visibility",
    "disable_core_limit",
)


def run(args: argparse.Namespace) -> int:
    return run_node_agent("vgpu dra-driver", load_config, args, _FLAGS, serve)


def serve(config: DraDriverConfig, container: DraDriverContainer | None = None) -> int:
    """Build everything from `config` and run until SIGTERM or SIGINT; the exit code."""
    container = container or DraDriverContainer(config=config)
    log.info(
        "starting DRA driver %s on node %s: registry %s, plugin dir %s, CDI dir %s",
        config.driver_name,
        config.node_name,
        config.registry_dir,
        config.plugin_path,
        config.cdi_dir,
    )
    try:
        daemon = container.daemon()
        daemon.run(stop_on_signals(log))
    except (
        ConfigError,
        GpuUnavailable,
        ClusterError,
        DraKubeletError,
        HostFileError,
        ValueError,
    ) as exc:
        return cannot_start("vgpu dra-driver", exc)
    return 0
