"""`vgpu explain POD`: why a GPU pod is Pending, node by node, and what would make it fit."""

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from vgpu.app.errors import ConfigError
from vgpu.app.explain.container import ExplainContainer
from vgpu.app.explain.inquiry import NotAGpuPod
from vgpu.app.fake_mode import FakeClusterError
from vgpu.app.scheduler.config import load_config
from vgpu.app.settings import read_yaml_mapping
from vgpu.domain import DomainError, Pod, pod_from_manifest
from vgpu.domain.explain import Explanation
from vgpu.ports.cluster import ClusterError, ClusterPort

DESCRIPTION = """\
Explain why a GPU pod does or does not fit: for every node one sentence (the closest card and
what it lacks: memory, cores, slices, type, uuid, NUMA, namespace quota), nodes grouped by
reason; the node and cards the pod would get; and, when it fits nowhere, the smallest changes
that would place it (fewer MiB or cores per card, other card types, more quota, or named pods
finishing). It runs the scheduler's own placement rules on what the cluster holds now and
never writes to the cluster. For a pod that is already placed it first says where it runs and
the cards it holds, then how it would fare if it were scheduled again now.

Exit status: 0 the pod fits (or is already placed), 1 it fits nowhere, 2 the pod or the
cluster cannot be read.
"""

EPILOG = """\
examples:
  vgpu explain team-a/trainer                       # a pod in the cluster (kubeconfig)
  vgpu explain -f pod.yaml                          # a pod not created yet, same cluster
  vgpu explain -f pod.yaml --fake-cluster cluster.yaml --json   # offline
  vgpu explain -f examples/explain/pod.yaml --fake-cluster examples/explain/cluster.yaml
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="say why a GPU pod is Pending and what would make it fit",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("pod", nargs="?", metavar="[NAMESPACE/]NAME", help="the pod to read from the cluster")
    add("-n", "--namespace", default="default", help="namespace of POD without one (default)")
    add("-f", "--file", type=Path, metavar="FILE", help="read the pod manifest from FILE")
    add("--fake-cluster", type=Path, metavar="FILE", help="an offline cluster file (see docs)")
    add("--kubeconfig", type=Path, metavar="FILE", help="kubeconfig (default as kubectl)")
    add("--config", type=Path, metavar="FILE", help="the scheduler's settings file")
    add("--json", action="store_true", help="print JSON for tools instead of sentences")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if (args.pod is None) == (args.file is None):
        print("vgpu explain: give a pod name or -f FILE (one of them)", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config, os.environ, {"kubeconfig": args.kubeconfig})
        container = ExplainContainer(config=config, fake_cluster_file=args.fake_cluster)
        try:
            pod = _pod(args, container.cluster())
            explanation = container.inquiry().explain(pod)
        finally:
            container.shutdown_resources()
    except (ConfigError, FakeClusterError, ClusterError, DomainError, NotAGpuPod) as exc:
        print(f"vgpu explain: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(explanation.to_dict(), indent=2))
    else:
        print("\n".join(explanation.lines()))
    placed = isinstance(explanation, Explanation) and explanation.held is not None
    return 0 if explanation.fits or placed else 1


def _pod(args: argparse.Namespace, cluster: ClusterPort) -> Pod:
    if args.file is not None:
        pod = pod_from_manifest(read_yaml_mapping(args.file, "pod manifest"))
        if not pod.name:
            raise DomainError(f"pod manifest {args.file}: metadata.name is missing")
        return pod
    namespace, _, name = str(args.pod).rpartition("/")
    namespace = namespace or args.namespace
    found = cluster.get_pod(namespace, name)
    if found is None:
        raise ClusterError(f"pod {namespace}/{name} not found")
    return found
