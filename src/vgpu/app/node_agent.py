"""What the per-node processes (`vgpu device-plugin`, `vgpu monitor`) share: the flags that say
which node they serve and how they reach the API and the GPUs, the settings behind them, their
fake modes (`--fake-gpus`, `--fake-cluster`) and how they stop."""

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vgpu.adapters.fake.cluster import FakeCluster
from vgpu.app.driver_wait import DriverWait
from vgpu.app.errors import ConfigError
from vgpu.app.fake_mode import load_fake_cluster
from vgpu.domain.node import ClusterNode
from vgpu.domain.vendor import Vendor
from vgpu.ports.gpu import GpuPort

if TYPE_CHECKING:
    from vgpu.adapters.kubernetes import ConnectionSettings

log = logging.getLogger(__name__)


NODE_AGENT_FLAGS = (
    "node_name",
    "kubeconfig",
    "fake_gpus",
    "fake_cluster",
    "log_level",
    "driver_wait",
)
"""The settings `add_node_agent_flags` adds flags for (`--config` names the file instead)."""


def add_node_agent_flags(parser: argparse.ArgumentParser, fake_gpus_help: str) -> None:
    """`--node-name`, `--config`, `--kubeconfig`, `--fake-gpus`, `--fake-cluster`,
    `--driver-wait` and `--log-level`."""
    add = parser.add_argument
    add("--node-name", metavar="NODE", help="this node's Kubernetes name (env NODE_NAME)")
    add("--config", type=Path, metavar="FILE", help="YAML file with the settings")
    add(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="kubeconfig for the API server (default: in-cluster, else ~/.kube/config)",
    )
    add("--fake-gpus", type=Path, metavar="FILE", help=fake_gpus_help)
    add(
        "--fake-cluster",
        type=Path,
        metavar="FILE",
        help="use an in-memory cluster described by this YAML file instead of the API server "
        "(the file format of `vgpu scheduler --fake-cluster`)",
    )
    add(
        "--driver-wait",
        type=float,
        metavar="SECONDS",
        help="wait this long for the NVIDIA driver at start, trying again and again, before "
        "exiting (0: exit at once; default 300)",
    )
    add("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO")


class NodeAgentSettings(BaseModel):
    """The settings every per-node process has; the node name is required."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_name: str = Field("", description="the Kubernetes node this process runs on")
    kubeconfig: Path | None = None
    fake_gpus: Path | None = None
    fake_cluster: Path | None = None
    log_level: str = Field("INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$")
    # how long NVML may fail at start (no driver yet) before the process exits; 0: exit at once
    driver_wait: float = Field(300.0, ge=0, le=86400)
    # the longest pause between two tries while waiting for the driver
    driver_retry_max: float = Field(30.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _has_node(self) -> Self:
        if not self.node_name:
            raise ValueError(
                "node_name is required: pass --node-name, or set NODE_NAME or VGPU_NODE_NAME"
            )
        return self


Settings = TypeVar("Settings", bound=NodeAgentSettings)
T = TypeVar("T")
Loader = Callable[[Path | None, Mapping[str, str], Mapping[str, Any]], Settings]


def settings_from_flags(
    command: str, load: Loader[Settings], args: argparse.Namespace, flags: Iterable[str]
) -> Settings | None:
    """The settings from `--config`, the environment and the flags (which win): those of
    `add_node_agent_flags` and the command's own `flags`. None after saying on stderr what is
    wrong (the command then exits 2)."""
    overrides = {name: getattr(args, name, None) for name in (*NODE_AGENT_FLAGS, *flags)}
    try:
        return load(args.config, os.environ, overrides)
    except ConfigError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None


def run_node_agent(
    command: str,
    load: Loader[Settings],
    args: argparse.Namespace,
    flags: Iterable[str],
    serve: Callable[[Settings], int],
) -> int:
    """A per-node command: its settings (exit 2 when they are bad), logging, then `serve`."""
    settings = settings_from_flags(command, load, args, flags)
    if settings is None:
        return 2
    logging.basicConfig(
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return serve(settings)


def connection_settings(settings: NodeAgentSettings) -> "ConnectionSettings":
    """How to reach the API: `kubeconfig` when set, else in-cluster (or ~/.kube/config)."""
    from vgpu.adapters.kubernetes import ConnectionSettings

    kubeconfig = str(settings.kubeconfig) if settings.kubeconfig is not None else None
    return ConnectionSettings(kubeconfig=kubeconfig)


def wait_for_driver(
    settings: NodeAgentSettings,
    probe: Callable[[], T],
    stop: threading.Event,
    on_wait: Callable[[str], None],
) -> T | None:
    """`probe()` (a GPU port call) once NVML answers, waiting `driver_wait` seconds at most
    (`vgpu.app.driver_wait`); None when `stop` is set first. GpuUnavailable after the wait."""
    return DriverWait(probe, settings.driver_wait, settings.driver_retry_max, on_wait).wait(stop)


def make_gpu_port(settings: NodeAgentSettings) -> GpuPort:
    """The fake inventory when `fake_gpus` names a file, else NVML."""
    if settings.fake_gpus is not None:
        from vgpu.adapters.fake.gpus import FakeGpus

        return FakeGpus.from_file(settings.fake_gpus)
    from vgpu.adapters.nvml import NvmlGpus

    return NvmlGpus()


def fake_node_cluster(path: Path, node: str, vendor: Vendor) -> FakeCluster:
    """The cluster a fake cluster file describes, with this node in it: added, without
    annotations, when the file does not list it (the process then plays its API server)."""
    cluster = load_fake_cluster(path, vendor)
    if cluster.get_node(node) is None:
        log.info(
            "node %s is not in the fake cluster file %s: added, without annotations",
            node,
            path,
        )
        cluster.put_node(ClusterNode(node, {}))
    return cluster


def stop_on_signals(logger: logging.Logger) -> threading.Event:
    """An event that SIGTERM and SIGINT set (handlers are installed from the main thread only,
    so an embedder that runs the daemon on another thread sets the event itself)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        logger.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    return stop


def cannot_start(command: str, problem: Exception) -> int:
    """Say on stderr why the process cannot start, as every `vgpu` command does; exit code 2."""
    print(f"{command}: cannot start: {problem}", file=sys.stderr)
    return 2
