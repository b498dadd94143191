"""What the per-node processes (`vgpu device-plugin`, `vgpu monitor`) share: the flags that say
which node they serve and how they reach the API and the GPUs, and the settings behind them."""

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vgpu.app.errors import ConfigError


def add_node_agent_flags(parser: argparse.ArgumentParser, fake_gpus_help: str) -> None:
    """`--node-name`, `--config`, `--kubeconfig` and `--fake-gpus`."""
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


class NodeAgentSettings(BaseModel):
    """The settings every per-node process has; the node name is required."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_name: str = Field("", description="the Kubernetes node this process runs on")
    kubeconfig: Path | None = None
    fake_gpus: Path | None = None

    @model_validator(mode="after")
    def _has_node(self) -> Self:
        if not self.node_name:
            raise ValueError(
                "node_name is required: pass --node-name, or set NODE_NAME or VGPU_NODE_NAME"
            )
        return self


Settings = TypeVar("Settings", bound=NodeAgentSettings)
Loader = Callable[[Path | None, Mapping[str, str], Mapping[str, Any]], Settings]


def settings_from_flags(
    command: str, load: Loader[Settings], args: argparse.Namespace, flags: Iterable[str]
) -> Settings | None:
    """The settings from `--config`, the environment and the named flags (which win), or None
    after saying on stderr what is wrong (the command then exits 2)."""
    overrides = {name: getattr(args, name, None) for name in flags}
    try:
        return load(args.config, os.environ, overrides)
    except ConfigError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None
