"""`vgpu dra-driver`'s command line: its flags, and the exit code and line of a driver that
cannot start."""

from pathlib import Path

import pytest
import yaml

from tests.unit.dra_driver.node import NODE, claim_json, make_node, ref
from vgpu.app.cli import main, parse

ROOT = Path(__file__).resolve().parents[3]


def test_the_flags_reach_the_settings() -> None:
    args = parse([
        "dra-driver", "--node-name", "n1", "--driver-name", "gpu.example.com",
        "--registry-dir", "/r", "--plugin-dir", "/p", "--cdi-dir", "/c", "--state-dir", "/s",
        "--hook-path", "/h", "--gpu-visibility", "env",
    ])
    assert (args.driver_name, args.registry_dir, args.plugin_dir, args.cdi_dir, args.state_dir,
            args.hook_path, args.gpu_visibility) == (
        "gpu.example.com", Path("/r"), Path("/p"), Path("/c"), Path("/s"), "/h", "env"
    )


def test_a_bad_setting_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dra-driver", "--node-name", "n1", "--driver-name", "Not_A_Name"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vgpu dra-driver: invalid dra-driver configuration")
    assert "driver_name" in err


def test_a_missing_plugin_registry_stops_it_with_a_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([
        "dra-driver", "--node-name", "node1",
        "--fake-gpus", str(ROOT / "examples" / "fake-gpus.yaml"),
        "--fake-cluster", str(ROOT / "examples" / "fake-cluster.yaml"),
        "--registry-dir", str(tmp_path / "missing"),
        "--plugin-dir", str(tmp_path / "plugin"), "--cdi-dir", str(tmp_path / "cdi"),
        "--state-dir", str(tmp_path / "state"), "--hook-path", str(tmp_path / "hook"),
    ])
    assert code == 2
    assert capsys.readouterr().err == (
        f"vgpu dra-driver: cannot start: plugin registry directory {tmp_path / 'missing'} does "
        "not exist (is the kubelet's plugins_registry directory mounted?)\n"
    )


def test_with_a_fake_cluster_the_claims_and_pods_its_file_lists_are_served(tmp_path: Path) -> None:
    manifest = claim_json("train", pods=(("trainer", "pod-uid"),))
    pod = {"metadata": {"name": "trainer", "namespace": "ml", "uid": "pod-uid"},
           "spec": {"nodeName": NODE, "containers": [{"name": "main"}]},
           "status": {"phase": "Running"}}
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"resourceClaims": [manifest], "pods": [pod]}))
    node = make_node(tmp_path, fake_cluster=cluster)
    node.container.dra_api.reset_override()

    outcome = node.preparer.prepare([ref(manifest)])["uid-train"]

    assert outcome.error == ""
    assert node.container.dra_api().get_pod("ml", "trainer")["metadata"]["uid"] == "pod-uid"
