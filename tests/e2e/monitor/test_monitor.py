"""The real `vgpu monitor` process against the API emulator and a temp host directory.

Regions are written byte by byte from the documented layout (tests/unit/monitor/regionbytes),
the process is scraped over HTTP, and the figures must be the fixture's.
"""

import os
import re
import signal
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.k8s_emulator import RunningApiServer, pod_manifest
from tests.e2e.secure_metrics import assert_only_allowed_tokens_get_metrics
from tests.unit.monitor.regionbytes import (
    GIB,
    MIB,
    UUID_A,
    UUID_B,
    two_gpu_spec,
    v0_bytes,
    v1_bytes,
    write_region,
)
from tests.unit.monitor.scrape import Series, key, parse, series

NODE = "gpu-node-1"
NAMESPACE = "team-a"


@dataclass
class Monitor:
    api: RunningApiServer
    host_dir: Path
    gpu_file: Path
    kubeconfig: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    uids: dict[str, str] = field(default_factory=dict)

    def add_pod(self, name: str, container: str = "main") -> str:
        manifest = pod_manifest(
            NAMESPACE,
            name,
            containers=[{"name": container, "image": "cuda"}],
            labels={"hami.io/vgpu-node": NODE},
            node_name=NODE,
            phase="Running",
        )
        uid: str = self.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", manifest)["metadata"][
            "uid"
        ]
        self.uids[name] = uid
        return uid

    def start(self, *extra: str) -> None:
        command = [
            sys.executable,
            "-m",
            "vgpu.app.cli",
            "monitor",
            "--node-name",
            NODE,
            "--kubeconfig",
            str(self.kubeconfig),
            "--fake-gpus",
            str(self.gpu_file),
            "--host-dir",
            str(self.host_dir),
            "--metrics-listen",
            "127.0.0.1:0",
            *extra,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VGPU_", "NODE_NAME"))}
        env.update(VGPU_INTERVAL="0.1", VGPU_CLEANUP_GRACE="0")
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        found = wait_for(lambda: re.search(r"serving metrics on (https?://[\d.]+:\d+)", self.log()))
        assert found, f"the monitor never served:\n{self.log()}"
        self.url = found.group(1)

    def scrape(self) -> Series:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return parse(response.read().decode())

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    return check()


@pytest.fixture()
def monitor(k8s_api: RunningApiServer, tmp_path: Path) -> Iterator[Monitor]:
    gpu_file = tmp_path / "gpus.yaml"
    gpu_file.write_text(
        f"gpus:\n  - uuid: {UUID_A}\n    name: Tesla V100-PCIE-32GB\n    memory_mib: 32768\n"
        "    used_mib: 4096\n    utilization: 40\n    memory_utilization: 15\n"
        f"  - uuid: {UUID_B}\n    name: Tesla V100-PCIE-32GB\n    memory_mib: 32768\n"
    )
    host_dir = tmp_path / "containers"
    host_dir.mkdir()
    env = Monitor(
        api=k8s_api,
        host_dir=host_dir,
        gpu_file=gpu_file,
        kubeconfig=k8s_api.kubeconfig(tmp_path / "kubeconfig"),
        log_file=tmp_path / "monitor.log",
    )
    try:
        yield env
    finally:
        env.stop()
        print(f"--- vgpu monitor log ---\n{env.log()}")  # pytest shows it on failure


def _ctr(pod: str, device: int, uuid: str) -> frozenset[tuple[str, str]]:
    return key(
        namespace=NAMESPACE, pod=pod, container="main", vdevice_index=str(device), device_uuid=uuid
    )


def _dir(monitor: Monitor, pod: str) -> Path:
    return monitor.host_dir / f"{monitor.uids[pod]}_main"


def test_metrics_carry_the_regions_figures_and_a_corrupt_one_spoils_nothing(
    monitor: Monitor,
) -> None:
    monitor.add_pod("train")
    monitor.add_pod("serve")
    monitor.add_pod("broken")
    write_region(_dir(monitor, "train"), v1_bytes(two_gpu_spec()))
    write_region(_dir(monitor, "serve"), v0_bytes(two_gpu_spec(uuids=[UUID_B])))
    corrupt = v1_bytes(two_gpu_spec())
    corrupt[0:4] = b"\0\0\0\0"
    write_region(_dir(monitor, "broken"), corrupt)

    monitor.start("--no-priority-feedback")
    found = wait_for(
        lambda: (s := monitor.scrape()) and series(s, "hami_vgpu_memory_used_bytes") and s
    )

    assert series(found, "hami_vgpu_memory_used_bytes") == {
        _ctr("train", 0, UUID_A): 1522 * MIB,
        _ctr("train", 1, UUID_B): 310 * MIB + 2 * GIB,
        _ctr("serve", 0, UUID_B): 1522 * MIB,
    }
    assert series(found, "hami_vgpu_memory_limit_bytes") == {
        _ctr("train", 0, UUID_A): 3000 * MIB,
        _ctr("train", 1, UUID_B): 5 * GIB,
        _ctr("serve", 0, UUID_B): 3000 * MIB,
    }
    assert series(found, "hami_container_device_utilization_ratio") == {
        _ctr("train", 0, UUID_A): 40,
        _ctr("train", 1, UUID_B): 60,
        _ctr("serve", 0, UUID_B): 40,
    }
    kernel = series(found, "hami_container_last_kernel_elapsed_seconds")
    assert set(kernel) == {_ctr("train", 0, UUID_A), _ctr("train", 1, UUID_B)}  # none for v0
    assert min(kernel.values()) >= time.time() - 1_760_000_000 - 60
    card = key(
        node=NODE, device_index="0", device_uuid=UUID_A, device_type="NVIDIA-Tesla V100-PCIE-32GB"
    )
    assert series(found, "hami_host_gpu_memory_used_bytes")[card] == 4096 * MIB
    assert series(found, "hami_host_gpu_utilization_ratio")[card] == 40
    assert wait_for(lambda: "wrong magic 0 at offset 0" in monitor.log())


def test_the_directory_of_a_deleted_pod_is_removed(monitor: Monitor) -> None:
    monitor.add_pod("train")
    monitor.add_pod("serve")
    write_region(_dir(monitor, "train"), v1_bytes(two_gpu_spec()))
    write_region(_dir(monitor, "serve"), v1_bytes(two_gpu_spec()))
    stranger = monitor.host_dir / "0000-not-a-pod_main"
    write_region(stranger, v1_bytes(two_gpu_spec()))

    monitor.start("--no-priority-feedback")
    assert wait_for(lambda: not stranger.exists()), "a directory of no pod was kept"
    before = monitor.scrape()
    monitor.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/serve")

    assert wait_for(lambda: not _dir(monitor, "serve").exists())
    assert _dir(monitor, "train").exists()
    after = monitor.scrape()
    pods = {dict(labels)["pod"] for labels in series(after, "hami_vgpu_memory_used_bytes")}
    assert {dict(labels)["pod"] for labels in series(before, "hami_vgpu_memory_used_bytes")} == {
        "train",
        "serve",
    }
    assert pods == {"train"}


def test_priority_feedback_writes_into_the_live_regions(monitor: Monitor) -> None:
    monitor.add_pod("high")
    monitor.add_pod("low")
    high = write_region(_dir(monitor, "high"), v1_bytes(two_gpu_spec(priority=0, recent_kernel=50)))
    low = write_region(_dir(monitor, "low"), v1_bytes(two_gpu_spec(priority=1, recent_kernel=0)))

    def kernel_and_switch(path: Path) -> tuple[int, int]:
        data = path.read_bytes()
        return struct.unpack_from("<i", data, 2_008_904)[0], struct.unpack_from(
            "<i", data, 2_008_900
        )[0]

    monitor.start()

    # the high-priority task counts down its activity; the low one is held meanwhile
    assert wait_for(lambda: kernel_and_switch(low) == (-1, 1))
    assert wait_for(lambda: 0 < kernel_and_switch(high)[0] < 50)
    assert kernel_and_switch(high)[1] == 0
    # once the high-priority task lapses, the low one is released
    assert wait_for(lambda: kernel_and_switch(low) == (0, 0), timeout=30)
    assert kernel_and_switch(high) == (0, 0)


def test_the_monitor_reads_only_this_nodes_pods_and_never_nodes(monitor: Monitor) -> None:
    monitor.add_pod("train")
    write_region(_dir(monitor, "train"), v1_bytes(two_gpu_spec()))
    monitor.start()
    assert wait_for(lambda: series(monitor.scrape(), "hami_vgpu_memory_used_bytes"))

    pod_reads = monitor.api.requests("GET", "/api/v1/pods")
    assert pod_reads
    for read in pod_reads:
        assert set(read.url.query["fieldSelector"].split(",")) == {f"spec.nodeName={NODE}"}
    assert monitor.api.requests("GET", "/api/v1/nodes") == []  # RBAC: no nodes needed


def test_sigterm_stops_the_monitor_cleanly(monitor: Monitor) -> None:
    monitor.start()
    with urllib.request.urlopen(f"{monitor.url}/healthz", timeout=10) as response:
        assert response.read() == b"ok\n"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{monitor.url}/other", timeout=10)
    assert missing.value.code == 404

    assert monitor.stop() == 0


def test_an_invalid_fake_gpu_file_stops_the_monitor_with_the_reason(monitor: Monitor) -> None:
    monitor.gpu_file.write_text("gpus: nope\n")
    with monitor.log_file.open("ab") as log:
        monitor.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vgpu.app.cli",
                "monitor",
                "--node-name",
                NODE,
                "--kubeconfig",
                str(monitor.kubeconfig),
                "--fake-gpus",
                str(monitor.gpu_file),
                "--host-dir",
                str(monitor.host_dir),
                "--metrics-listen",
                "127.0.0.1:0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    assert monitor.process.wait(timeout=60) == 2
    assert f"vgpu monitor: cannot start: {monitor.gpu_file}: " in monitor.log()


def test_with_secure_metrics_only_tokens_allowed_to_get_metrics_are_answered(
    monitor: Monitor,
) -> None:
    monitor.start("--secure-metrics")
    assert monitor.url.startswith("https://")

    assert_only_allowed_tokens_get_metrics(monitor.api, monitor.url)

    with httpx.Client(base_url=monitor.url, verify=False, timeout=10) as client:
        assert client.get("/healthz").status_code == 200  # the kubelet's probes need no token
        assert client.get("/readyz").status_code == 200
    assert monitor.process is not None and monitor.process.poll() is None
