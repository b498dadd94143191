from pathlib import Path

import pytest

from tests.unit.device_plugin.builders import UUID_A, UUID_B, scheduled_pod, world
from vgpu.domain.allocation import Mount
from vgpu.domain.pod import Container
from vgpu.domain.vendor import NVIDIA
from vgpu.ports.kubelet import DevicePluginError

TO_ALLOCATE = NVIDIA.to_allocate_annotation


def test_the_lock_owner_gets_hami_core_envs_and_mounts(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,3000,30:;"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-3"]])

    vgpu = f"{w.hook}/vgpu"
    assert answer.envs == {
        "NVIDIA_VISIBLE_DEVICES": UUID_A,
        "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
        "CUDA_DEVICE_SM_LIMIT": "30",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": f"{vgpu}/cache0.cache",
    }
    assert list(answer.mounts) == [
        Mount(f"{vgpu}/libvgpu.so", f"{vgpu}/libvgpu.so", True),
        Mount(vgpu, f"{vgpu}/containers/uid-train_main", False),
        Mount("/tmp/vgpulock", "/tmp/vgpulock", False),
        Mount("/etc/ld.so.preload", f"{vgpu}/ld.so.preload", True),
    ]
    assert (w.hook / "vgpu" / "containers" / "uid-train_main").is_dir()


def test_a_complete_pod_is_marked_success_and_the_node_lock_released(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,3000,30:;"))
    assert w.lock_value() is not None

    w.allocator.allocate([[f"{UUID_A}-0"]])

    pod = w.pod()
    assert pod.annotations[TO_ALLOCATE] == ";"
    assert pod.annotations["hami.io/bind-phase"] == "success"
    assert pod.annotations[NVIDIA.allocated_annotation] == f"{UUID_A},NVIDIA,3000,30:;"
    assert w.lock_value() is None


def test_containers_are_served_in_order_and_segments_emptied_one_by_one(tmp_path: Path) -> None:
    w = world(tmp_path)
    grants = f";{UUID_A},NVIDIA,1000,10:{UUID_B},NVIDIA,1000,10:;{UUID_B},NVIDIA,5000,0:;"
    w.put(
        scheduled_pod(
            grants,
            Container("setup", is_init=True),
            Container("trainer", limits={"nvidia.com/gpu": 2}),
            Container("sidecar", limits={"nvidia.com/gpu": 1, "nvidia.com/priority": 1}),
        )
    )

    (first,) = w.allocator.allocate([[f"{UUID_A}-0", f"{UUID_B}-0"]])
    assert first.envs["NVIDIA_VISIBLE_DEVICES"] == f"{UUID_A},{UUID_B}"
    assert first.envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == "1000m"
    assert w.pod().annotations[TO_ALLOCATE] == f";;{UUID_B},NVIDIA,5000,0:;"
    assert w.pod().annotations["hami.io/bind-phase"] == "allocating"
    assert w.lock_value() is not None

    (second,) = w.allocator.allocate([[f"{UUID_A}-1"]])
    assert second.envs["NVIDIA_VISIBLE_DEVICES"] == UUID_B
    assert second.envs["CUDA_TASK_PRIORITY"] == "1"
    assert Mount(f"{w.hook}/vgpu", f"{w.hook}/vgpu/containers/uid-train_sidecar", False) in (
        second.mounts
    )
    assert w.pod().annotations[TO_ALLOCATE] == ";;;"
    assert w.pod().annotations["hami.io/bind-phase"] == "success"
    assert w.lock_value() is None


def test_several_containers_in_one_call_get_one_answer_each(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(
        scheduled_pod(
            f"{UUID_A},NVIDIA,1000,0:;{UUID_B},NVIDIA,2000,0:;",
            Container("a", limits={"nvidia.com/gpu": 1}),
            Container("b", limits={"nvidia.com/gpu": 1}),
        )
    )

    answers = w.allocator.allocate([[f"{UUID_A}-0"], [f"{UUID_B}-0"]])

    assert [a.envs["NVIDIA_VISIBLE_DEVICES"] for a in answers] == [UUID_A, UUID_B]
    assert w.pod().annotations["hami.io/bind-phase"] == "success"


def test_when_the_lock_owner_waits_elsewhere_the_oldest_waiting_pod_here_is_served(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_B},NVIDIA,2000,0:;", name="newer", bind_time=200), lock=False)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;", name="older", bind_time=100), lock=False)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;", name="elsewhere", node="other", bind_time=1))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == UUID_A
    assert w.pod("older").annotations["hami.io/bind-phase"] == "success"
    assert w.pod("newer").annotations["hami.io/bind-phase"] == "allocating"


def test_a_grant_naming_a_card_this_node_lacks_is_refused_and_the_pod_failed(
    tmp_path: Path,
) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod("GPU-ffffffff-0000-0000-0000-000000000000,NVIDIA,1000,0:;"))

    with pytest.raises(DevicePluginError, match="not a GPU of node gpu-node-1") as err:
        w.allocator.allocate([[f"{UUID_A}-0"]])

    assert "GPU-ffffffff-0000-0000-0000-000000000000" in str(err.value)
    assert "default/train" in str(err.value)
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"
    assert w.lock_value() is None
    assert not (w.hook / "vgpu" / "containers").exists()
    (event,) = w.cluster.events
    assert event[:3] == ("default", "train", "GPUAllocationFailed") and event[4] is True


def test_a_grant_larger_than_the_card_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,99999,0:;"))

    with pytest.raises(DevicePluginError, match=f"card {UUID_A} would be over capacity"):
        w.allocator.allocate([[f"{UUID_A}-0"]])
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"


def test_a_grant_for_another_vendor_is_refused(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},Hygon,1000,0:;"))

    with pytest.raises(DevicePluginError, match="vendor 'Hygon'"):
        w.allocator.allocate([[f"{UUID_A}-0"]])


def test_a_device_count_that_differs_from_the_grant_fails_the_pod(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;"))

    with pytest.raises(DevicePluginError, match=r"asks for 2 device.* granted 1"):
        w.allocator.allocate([[f"{UUID_A}-0", f"{UUID_B}-0"]])
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"
    assert w.pod().annotations[TO_ALLOCATE] == f"{UUID_A},NVIDIA,1000,0:;"


def test_a_malformed_grant_annotation_fails_the_pod_with_the_codec_error(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,lots,0:;"))

    with pytest.raises(DevicePluginError, match="memory='lots' is not a whole number"):
        w.allocator.allocate([[f"{UUID_A}-0"]])
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"
    assert w.lock_value() is None


def test_no_waiting_pod_is_a_clear_refusal_that_touches_nothing(tmp_path: Path) -> None:
    w = world(tmp_path)
    done = scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;", **{"hami.io/bind-phase": "success"})
    w.put(done, lock=False)

    with pytest.raises(DevicePluginError, match="no pod on node gpu-node-1 is waiting"):
        w.allocator.allocate([[f"{UUID_A}-0"]])
    assert w.pod().annotations["hami.io/bind-phase"] == "success"


def test_more_container_requests_than_grants_fail_the_pod(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;"))

    with pytest.raises(DevicePluginError, match="no container left"):
        w.allocator.allocate([[f"{UUID_A}-0"], [f"{UUID_B}-0"]])
    assert w.pod().annotations["hami.io/bind-phase"] == "failed"


def test_cuda_disable_control_is_honoured_only_in_trusted_namespaces(tmp_path: Path) -> None:
    w = world(tmp_path, disable_control_namespaces=frozenset({"admin"}))
    off = Container("main", limits={"nvidia.com/gpu": 1}, env={"CUDA_DISABLE_CONTROL": "true"})
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;", off, name="tenant"))
    w.put(
        scheduled_pod(f"{UUID_B},NVIDIA,1000,0:;", off, name="ops", namespace="admin"), lock=False
    )

    (tenant,) = w.allocator.allocate([[f"{UUID_A}-0"]])
    (ops,) = w.allocator.allocate([[f"{UUID_B}-0"]])

    assert "/etc/ld.so.preload" in [m.container_path for m in tenant.mounts]
    assert "/etc/ld.so.preload" not in [m.container_path for m in ops.mounts]


def test_a_versioned_libvgpu_and_a_license_are_mounted_when_present(tmp_path: Path) -> None:
    w = world(tmp_path)
    vgpu = w.hook / "vgpu"
    vgpu.mkdir(parents=True)
    (vgpu / "license").write_text("x")
    w.put(scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;"))

    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert Mount("/tmp/license", f"{vgpu}/license", True) in answer.mounts


def test_pending_grants_lists_the_containers_still_to_serve(tmp_path: Path) -> None:
    w = world(tmp_path)
    w.put(scheduled_pod(f";{UUID_B},NVIDIA,1000,0:;;{UUID_A},NVIDIA,1000,0:;"))

    assert [[g.uuid for g in c] for c in w.allocator.pending_grants()] == [[UUID_B], [UUID_A]]


def test_a_pod_that_reaches_the_cache_a_moment_late_is_still_served(tmp_path: Path) -> None:
    late = scheduled_pod(f"{UUID_A},NVIDIA,1000,0:;")
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            w.put(late)

    w = world(tmp_path, settle_s=1.0, sleep=sleep)
    (answer,) = w.allocator.allocate([[f"{UUID_A}-0"]])

    assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == UUID_A
    assert len(waits) == 3


def test_with_nothing_waiting_it_gives_up_after_the_settle_time(tmp_path: Path) -> None:
    waits: list[float] = []
    w = world(tmp_path, settle_s=1.0, sleep=waits.append)

    with pytest.raises(DevicePluginError, match="no pod on node gpu-node-1 is waiting"):
        w.allocator.allocate([[f"{UUID_A}-0"]])
    assert sum(waits) == pytest.approx(1.0)
