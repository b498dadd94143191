"""How long a big `--fake-cluster` file takes to load: pure-Python YAML, libyaml, JSON.

Writes the cluster of bench/fixture.py (A100 nodes, running pods with their grant
annotations) as a fake-cluster file in YAML and in JSON, then times parsing alone with each
loader, and the whole `load_fake_cluster` (parse, validate, build the fake cluster).

    .venv/bin/python bench/load_files.py                  # 1000 x 8, 20,000 pods
    .venv/bin/python bench/load_files.py --nodes 50 --pods 1000
"""

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from fixture import Cluster, Size, build_cluster

from vgpu.app.fake_mode import load_fake_cluster
from vgpu.domain import NVIDIA


def fake_cluster_body(cluster: Cluster) -> dict[str, Any]:
    nodes = [
        {
            "name": node,
            "gpus": [
                {
                    "uuid": d.uuid,
                    "type": d.type,
                    "memory": d.memory,
                    "count": d.count,
                    "numa": d.numa,
                }
                for d in cards
            ],
        }
        for node, cards in cluster.devices.items()
    ]
    pods = []
    for pod in cluster.running:
        namespace, name = pod.key.split("/")
        grant = pod.grants[0][0]
        limits = {
            "nvidia.com/gpu": 1,
            "nvidia.com/gpumem": grant.memory,
            "nvidia.com/gpucores": grant.cores,
        }
        pods.append(
            {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {
                        "hami.io/vgpu-node": pod.node,
                        NVIDIA.allocated_annotation: pod.annotation,
                    },
                },
                "spec": {
                    "nodeName": pod.node,
                    "containers": [{"name": "main", "resources": {"limits": limits}}],
                },
                "status": {"phase": "Running"},
            }
        )
    return {"nodes": nodes, "pods": pods}


def timed(work: Callable[[], object]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=20_000)
    args = parser.parse_args(argv)
    body = fake_cluster_body(build_cluster(Size(args.nodes, args.gpus, args.pods, 0)))
    with tempfile.TemporaryDirectory() as directory:
        as_yaml = Path(directory) / "cluster.yaml"
        as_json = Path(directory) / "cluster.json"
        as_yaml.write_text(yaml.safe_dump(body, sort_keys=False))
        as_json.write_text(json.dumps(body))
        text_yaml, text_json = as_yaml.read_text(), as_json.read_text()
        rows = [
            (
                "parse YAML, pure-Python loader (before)",
                lambda: yaml.load(text_yaml, yaml.SafeLoader),
            ),
            ("parse YAML, libyaml C loader", lambda: yaml.load(text_yaml, yaml.CSafeLoader)),
            ("parse JSON", lambda: json.loads(text_json)),
            ("load_fake_cluster, YAML file", lambda: load_fake_cluster(as_yaml, NVIDIA)),
            ("load_fake_cluster, JSON file", lambda: load_fake_cluster(as_json, NVIDIA)),
        ]
        print(
            f"{args.nodes} x {args.gpus} GPUs, {args.pods:,} pods: YAML "
            f"{as_yaml.stat().st_size / 1e6:.1f} MB, JSON {as_json.stat().st_size / 1e6:.1f} MB"
        )
        for label, work in rows:
            print(f"  {label:<42} {timed(work):7.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
