"""The real device plugin under a HAMi scheduler: it answers the node handshake and publishes
NVLink pair scores when ENABLE_TOPOLOGY_SCORE=true (docs/protocol.md#node-score-annotation, #node-handshake)."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.device_plugin.harness import NODE, UUID_A, UUID_B, PluginEnv, gpu_file_text

HANDSHAKE = "hami.io/node-handshake"
SCORES = "hami.io/node-nvidia-score"

Start = Callable[..., PluginEnv]


def _fast_config(tmp_path: Path) -> str:
    path = tmp_path / "plugin.yaml"
    path.write_text("register_interval: 0.2\n")
    return str(path)


def test_it_answers_a_v2_7_schedulers_requesting_stamp_with_reported(
    start_plugin: Start, tmp_path: Path
) -> None:
    env = start_plugin("--config", _fast_config(tmp_path))
    assert env.kubelet.wait_for(lambda: HANDSHAKE in env.node_annotations())
    assert env.node_annotations()[HANDSHAKE].startswith("Reported ")

    env.api.merge_patch(
        f"/api/v1/nodes/{NODE}",
        {"metadata": {"annotations": {HANDSHAKE: "Requesting_2026-08-21 06:20:39"}}},
    )

    assert env.kubelet.wait_for(
        lambda: env.node_annotations().get(HANDSHAKE, "").startswith("Reported ")
    ), env.node_annotations()


def test_it_publishes_pair_scores_from_the_gpus_links(
    start_plugin: Start, plugin_env: PluginEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin_env.gpu_file.write_text(
        gpu_file_text()
        + f"links:\n  - {{between: [{UUID_A}, {UUID_B}], pcie: single-switch, nvlinks: 4}}\n"
    )
    monkeypatch.setenv("ENABLE_TOPOLOGY_SCORE", "true")
    env = start_plugin()

    assert env.kubelet.wait_for(lambda: SCORES in env.node_annotations())
    assert json.loads(env.node_annotations()[SCORES]) == [
        {"uuid": UUID_A, "score": {UUID_B: 450}},
        {"uuid": UUID_B, "score": {UUID_A: 450}},
    ]
