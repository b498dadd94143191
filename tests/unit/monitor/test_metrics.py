"""The monitor's /metrics body: HAMi's names, labels and units, from regions and host cards."""

from pathlib import Path

import pytest

from tests.unit.monitor.regionbytes import (
    GIB,
    MIB,
    UUID_A,
    UUID_B,
    two_gpu_spec,
    v0_bytes,
    v1_bytes,
)
from tests.unit.monitor.scrape import Series, key, parse, series
from vgpu.adapters.fake.accounting import FakeAccounting
from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.adapters.hamicore.layout import decode
from vgpu.app.monitor.metrics import MonitorMetrics, MonitorSources
from vgpu.domain.pod import Container, Pod
from vgpu.ports.accounting import Region, RegionUnreadable
from vgpu.ports.cluster import ClusterError
from vgpu.ports.gpu import GpuUnavailable, GpuUsage

NODE = "gpu-node-1"
NOW = 1_760_000_042.5
LABEL = {"hami.io/vgpu-node": NODE}


def _region(data: bytearray) -> Region:
    return decode(data, len(data))


def _pod(name: str, uid: str, *containers: str, labels: dict[str, str] | None = None) -> Pod:
    return Pod(
        "team-a",
        name,
        uid=uid,
        labels=LABEL if labels is None else labels,
        containers=(Container("setup", is_init=True), *(Container(c) for c in containers)),
        node_name=NODE,
    )


class _Cards:
    """A GpuPort whose usage is given as is (FakeGpus cannot say "not supported")."""

    def __init__(self, cards: list[GpuUsage] | GpuUnavailable) -> None:
        self._cards = cards

    def read_usage(self) -> list[GpuUsage]:
        if isinstance(self._cards, GpuUnavailable):
            raise self._cards
        return self._cards


def _scrape(
    fake: FakeAccounting,
    pods: list[Pod] | ClusterError,
    gpus: object = None,
    legacy: bool = False,
) -> Series:
    def list_pods() -> list[Pod]:
        if isinstance(pods, ClusterError):
            raise pods
        return pods

    sources = MonitorSources(
        node=NODE,
        gpus=gpus or _Cards([]),  # type: ignore[arg-type]
        accounting=fake,
        pods=list_pods,
        clock=lambda: NOW,
    )
    return parse(MonitorMetrics(sources, legacy=legacy).render().decode())


def _ctr(
    device: int, uuid: str, container: str = "main", pod: str = "train"
) -> frozenset[tuple[str, str]]:
    return key(
        namespace="team-a",
        pod=pod,
        container=container,
        vdevice_index=str(device),
        device_uuid=uuid,
    )


def test_host_cards_are_reported_with_hamis_labels(tmp_path: Path) -> None:
    file = tmp_path / "gpus.yaml"
    file.write_text(
        f"gpus:\n  - uuid: {UUID_A}\n    name: NVIDIA A100-SXM4-40GB\n    memory_mib: 40960\n"
        "    used_mib: 1500\n    utilization: 37\n    memory_utilization: 12\n"
    )
    gpus = FakeGpus.from_file(file)

    found = _scrape(FakeAccounting(), [], gpus)

    card = {"node": NODE, "device_index": "0", "device_uuid": UUID_A}
    kind = "NVIDIA-NVIDIA A100-SXM4-40GB"  # HAMi prefixes unconditionally
    assert series(found, "hami_host_gpu_memory_used_bytes") == {
        key(**card, device_type=kind): 1500 * MIB
    }
    assert series(found, "hami_host_gpu_utilization_ratio") == {key(**card, device_type=kind): 37}
    assert series(found, "hami_host_gpu_memory_controller_utilization_ratio") == {
        key(device_index="0", device_uuid=UUID_A, device_type=kind): 12
    }


def test_host_figures_a_card_cannot_give_are_left_out() -> None:
    cards = _Cards(
        [GpuUsage(UUID_A, 0, "T4", None, None, None), GpuUsage(UUID_B, 1, "T4", 5, 6, 7)]
    )

    found = _scrape(FakeAccounting(), [], cards)

    for name in (
        "hami_host_gpu_memory_used_bytes",
        "hami_host_gpu_utilization_ratio",
        "hami_host_gpu_memory_controller_utilization_ratio",
    ):
        assert [dict(labels)["device_uuid"] for labels in series(found, name)] == [UUID_B]


def test_container_figures_sum_the_live_processes_of_each_device() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec())))

    found = _scrape(fake, [_pod("train", "uid-1", "main")])

    a, b = _ctr(0, UUID_A), _ctr(1, UUID_B)
    used_a, used_b = 1522 * MIB, 310 * MIB + 2 * GIB  # the exited process (status 0) is left out
    assert series(found, "hami_vgpu_memory_used_bytes") == {a: used_a, b: used_b}
    assert series(found, "hami_container_device_memory_bytes") == {a: used_a, b: used_b}
    assert series(found, "hami_vgpu_memory_limit_bytes") == {a: 3000 * MIB, b: 5 * GIB}
    assert series(found, "hami_container_device_utilization_ratio") == {a: 40, b: 60}
    assert series(found, "hami_vgpu_memory_context_bytes") == {a: 400 * MIB, b: 300 * MIB}
    assert series(found, "hami_vgpu_memory_module_bytes") == {a: 20 * MIB, b: 10 * MIB}
    assert series(found, "hami_vgpu_memory_buffer_bytes") == {a: 1100 * MIB, b: 2 * GIB}
    assert series(found, "hami_container_last_kernel_elapsed_seconds") == {a: 42.5, b: 42.5}


def test_each_process_using_a_device_gets_its_own_series() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec())))

    found = _scrape(fake, [_pod("train", "uid-1", "main")])

    def proc(device: int, uuid: str, pid: str, host: str) -> frozenset[tuple[str, str]]:
        return _ctr(device, uuid) | {("pid", pid), ("host_pid", host)}

    assert series(found, "vgpu_container_process_memory_bytes") == {
        proc(0, UUID_A, "17", "90017"): 1022 * MIB,
        proc(0, UUID_A, "18", "90018"): 500 * MIB,
        proc(1, UUID_B, "18", "90018"): 310 * MIB + 2 * GIB,
    }
    assert series(found, "vgpu_container_process_utilization_ratio") == {
        proc(0, UUID_A, "17", "90017"): 35,
        proc(0, UUID_A, "18", "90018"): 5,
        proc(1, UUID_B, "18", "90018"): 60,
    }


def test_a_layout_0_region_has_no_last_kernel_series() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v0_bytes(two_gpu_spec())))

    found = _scrape(fake, [_pod("train", "uid-1", "main")])

    assert series(found, "hami_vgpu_memory_used_bytes")[_ctr(0, UUID_A)] == 1522 * MIB
    assert series(found, "hami_container_last_kernel_elapsed_seconds") == {}


def test_a_kernel_time_in_the_future_reads_as_zero_seconds() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec(last_kernel_time=int(NOW) + 60))))

    found = _scrape(fake, [_pod("train", "uid-1", "main")])

    assert set(series(found, "hami_container_last_kernel_elapsed_seconds").values()) == {0}


def test_an_empty_device_slot_is_skipped() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec(uuids=[UUID_A, ""]))))

    found = _scrape(fake, [_pod("train", "uid-1", "main")])

    assert list(series(found, "hami_vgpu_memory_limit_bytes")) == [_ctr(0, UUID_A)]


@pytest.mark.parametrize(
    "pod",
    [
        _pod("train", "uid-1", "other"),  # no app container of that name
        _pod("train", "uid-1", "main", labels={}),  # not a vGPU pod
        _pod("train", "uid-1", "main", labels={"hami.io/vgpu-node": "elsewhere"}),
        _pod("train", "uid-2", "main"),  # another pod
    ],
)
def test_directories_without_a_matching_vgpu_pod_container_export_nothing(pod: Pod) -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec())))

    assert series(_scrape(fake, [pod]), "hami_vgpu_memory_used_bytes") == {}


def test_an_init_container_name_does_not_match() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "setup", _region(v1_bytes(two_gpu_spec())))

    assert (
        series(_scrape(fake, [_pod("train", "uid-1", "main")]), "hami_vgpu_memory_used_bytes") == {}
    )


def test_an_unreadable_region_leaves_the_other_containers_intact() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", RegionUnreadable("wrong magic 0 at offset 0"))
    fake.add("uid-2", "main")  # not ready
    fake.add("uid-3", "main", _region(v1_bytes(two_gpu_spec())))
    pods = [_pod("bad", "uid-1", "main"), _pod("new", "uid-2", "main"), _pod("ok", "uid-3", "main")]

    found = _scrape(fake, pods)

    assert {dict(labels)["pod"] for labels in series(found, "hami_vgpu_memory_used_bytes")} == {
        "ok"
    }


def test_a_failing_api_leaves_the_host_figures() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec())))
    cards = _Cards([GpuUsage(UUID_A, 0, "T4", 5, 6, 7)])

    found = _scrape(fake, ClusterError("connection refused"), cards)

    assert series(found, "hami_vgpu_memory_used_bytes") == {}
    assert len(series(found, "hami_host_gpu_memory_used_bytes")) == 1


def test_a_failing_gpu_port_leaves_the_container_figures() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec())))

    found = _scrape(fake, [_pod("train", "uid-1", "main")], _Cards(GpuUnavailable("no driver")))

    assert series(found, "hami_host_gpu_memory_used_bytes") == {}
    assert len(series(found, "hami_vgpu_memory_used_bytes")) == 2


def test_legacy_names_come_only_with_the_switch() -> None:
    fake = FakeAccounting()
    fake.add("uid-1", "main", _region(v1_bytes(two_gpu_spec())))
    cards = _Cards([GpuUsage(UUID_A, 0, "T4", 5 * MIB, 6, 7)])
    pods = [_pod("train", "uid-1", "main")]

    plain = _scrape(fake, pods, cards)
    legacy = _scrape(fake, pods, cards, legacy=True)

    legacy_names = {
        "HostGPUMemoryUsage",
        "HostCoreUtilization",
        "vGPU_device_memory_usage_in_bytes",
        "vGPU_device_memory_limit_in_bytes",
        "Device_memory_desc_of_container",
        "Device_utilization_desc_of_container",
        "Device_last_kernel_of_container",
    }
    assert not legacy_names & {name for name, _ in plain}
    assert legacy_names <= {name for name, _ in legacy}
    old = key(
        podnamespace="team-a", podname="train", ctrname="main", vdeviceid="0", deviceuuid=UUID_A
    )
    assert series(legacy, "vGPU_device_memory_usage_in_bytes")[old] == 1522 * MIB
    assert series(legacy, "Device_utilization_desc_of_container")[old] == 40
    desc = old | {
        ("context", str(400 * MIB)),
        ("module", str(20 * MIB)),
        ("data", str(1100 * MIB)),
        ("offset", str(2 * MIB)),
    }
    assert series(legacy, "Device_memory_desc_of_container")[desc] == 1522 * MIB
    host = key(nodeid=NODE, deviceidx="0", deviceuuid=UUID_A, devicetype="NVIDIA-T4")
    assert series(legacy, "HostGPUMemoryUsage") == {host: 5 * MIB}
    assert series(legacy, "HostCoreUtilization") == {host: 6}
