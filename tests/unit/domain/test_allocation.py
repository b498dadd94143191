from vgpu.domain import AllocationConfig, AllocationInput, DeviceGrant, Mount, allocate_container

GRANTS = (DeviceGrant("GPU-a", "NVIDIA", 3000, 30), DeviceGrant("GPU-b", "NVIDIA", 4000, 30))


def call(**kw: object) -> AllocationInput:
    values: dict[str, object] = {
        "pod_uid": "uid-1",
        "namespace": "team",
        "container": "main",
        "cache_id": "c0ffee",
    }
    values.update(kw)
    return AllocationInput(**values)  # type: ignore[arg-type]


def test_envs_follow_hami_core_contract() -> None:
    result = allocate_container(GRANTS, call(priority=0), AllocationConfig())
    assert result.envs == {
        "NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "4000m",
        "CUDA_DEVICE_SM_LIMIT": "30",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/usr/local/vgpu/c0ffee.cache",
        "CUDA_TASK_PRIORITY": "0",
    }


def test_mounts_in_hami_order() -> None:
    result = allocate_container(GRANTS, call(), AllocationConfig())
    assert result.mounts == (
        Mount("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", True),
        Mount("/usr/local/vgpu", "/usr/local/vgpu/containers/uid-1_main", False),
        Mount("/tmp/vgpulock", "/tmp/vgpulock", False),
        Mount("/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", True),
    )


def test_node_options() -> None:
    config = AllocationConfig(
        hook_path="/opt", memory_scaling=2, disable_core_limit=True, cuda_log_level="4"
    )
    result = allocate_container(
        GRANTS, call(libvgpu_host_path="/opt/vgpu/libvgpu.so.v2", license_present=True), config
    )
    assert result.envs["CUDA_OVERSUBSCRIBE"] == "true"
    assert result.envs["GPU_CORE_UTILIZATION_POLICY"] == "disable"
    assert result.envs["LIBCUDA_LOG_LEVEL"] == "4"
    assert result.mounts[0] == Mount("/opt/vgpu/libvgpu.so", "/opt/vgpu/libvgpu.so.v2", True)
    assert [m.container_path for m in result.mounts[-2:]] == [
        "/tmp/license",
        "/usr/bin/vgpuvalidator",
    ]


def test_same_card_twice_is_visible_once() -> None:
    twice = (DeviceGrant("GPU-a", "NVIDIA", 1, 0), DeviceGrant("GPU-a", "NVIDIA", 2, 0))
    assert (
        allocate_container(twice, call(), AllocationConfig()).envs["NVIDIA_VISIBLE_DEVICES"]
        == "GPU-a"
    )


def test_disable_control_only_in_trusted_namespaces() -> None:
    off = {"CUDA_DISABLE_CONTROL": "true"}
    untrusted = allocate_container(GRANTS, call(container_env=off), AllocationConfig())
    assert "/etc/ld.so.preload" in [m.container_path for m in untrusted.mounts]
    assert "not allowed to disable GPU limits" in untrusted.notes[0]
    trusted = allocate_container(
        GRANTS,
        call(container_env=off),
        AllocationConfig(disable_control_namespaces=frozenset({"team"})),
    )
    assert "/etc/ld.so.preload" not in [m.container_path for m in trusted.mounts]
