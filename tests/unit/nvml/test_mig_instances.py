"""MIG instances through NVML (docs/protocol.md#mig-instance-lifecycle) against a patched driver that models them."""

from types import SimpleNamespace
from typing import Any

import pytest
from pytest_mock import MockerFixture

from tests.unit.nvml.driver import A100_UUID, V100_UUID, Driver, gpus, pynvml
from vgpu.adapters.nvml.miginstances import profile_slices
from vgpu.domain.mig import MigPlacement
from vgpu.ports.gpu import MigError

ONE, THREE = pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE


class MigModel:
    """The A100's GPU and compute instances, as the patched NVML calls see and change them."""

    def __init__(self) -> None:
        self.instances: dict[int, dict[str, Any]] = {}  # GI id -> {profile, start, size, ci}
        self.fail_compute_instance = False

    def create_gi(self, handle: Any, profile_id: int, placement: Any) -> Any:
        gi_id = max(self.instances, default=0) + 1
        start, size = placement._obj.start, placement._obj.size
        self.instances[gi_id] = {"profile": profile_id, "start": start, "size": size, "ci": None}
        return SimpleNamespace(gi=gi_id)

    def create_ci(self, gi: Any, profile_id: int) -> Any:
        if self.fail_compute_instance:
            raise pynvml.NVMLError_InsufficientResources()
        self.instances[gi.gi]["ci"] = 0
        return SimpleNamespace(gi=gi.gi, ci=0)

    def gi_by_id(self, handle: Any, gi_id: int) -> Any:
        if gi_id not in self.instances:
            raise pynvml.NVMLError_NotFound()
        return SimpleNamespace(gi=gi_id)

    def gi_info(self, gi: Any) -> Any:
        entry = self.instances[gi.gi]
        placement = SimpleNamespace(start=entry["start"], size=entry["size"])
        return SimpleNamespace(id=gi.gi, profileId=entry["profile"], placement=placement)

    def mig_device(self, handle: Any, index: int) -> Any:
        live = sorted(g for g, e in self.instances.items() if e["ci"] is not None)
        if index >= len(live):
            raise pynvml.NVMLError_NotFound()
        return SimpleNamespace(mig=live[index])

    def destroy_gi(self, gi: Any) -> None:
        del self.instances[gi.gi]

    def destroy_ci(self, ci: Any) -> None:
        self.instances[ci.gi]["ci"] = None


@pytest.fixture
def model(driver: Driver, mocker: MockerFixture) -> MigModel:
    mig = MigModel()
    a100 = driver.cards[1]
    a100.mig = (pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE)
    a100.mig_profiles = {
        ONE: SimpleNamespace(
            id=0, sliceCount=1, instanceCount=7, multiprocessorCount=14, memorySizeMB=9856,
            placements=[(i, 1) for i in range(7)],
        ),
        THREE: SimpleNamespace(
            id=2, sliceCount=3, instanceCount=2, multiprocessorCount=42, memorySizeMB=40192,
            placements=[(0, 4), (4, 4)],
        ),
    }  # fmt: skip
    real_uuid = driver.mocks["nvmlDeviceGetUUID"].side_effect

    def uuid(device: Any) -> str:
        if isinstance(device, SimpleNamespace):
            return f"MIG-aaaa-{device.mig}"
        return str(real_uuid(device))

    patches = {
        "nvmlDeviceCreateGpuInstanceWithPlacement": mig.create_gi,
        "nvmlGpuInstanceGetInfo": mig.gi_info,
        "nvmlGpuInstanceGetComputeInstanceProfileInfo": lambda gi, p, e: SimpleNamespace(id=p),
        "nvmlGpuInstanceCreateComputeInstance": mig.create_ci,
        "nvmlComputeInstanceGetInfo": lambda ci: SimpleNamespace(id=ci.ci),
        "nvmlDeviceGetMaxMigDeviceCount": lambda handle: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig.mig_device,
        "nvmlDeviceGetGpuInstanceId": lambda device: device.mig,
        "nvmlDeviceGetComputeInstanceId": lambda device: 0,
        "nvmlDeviceGetGpuInstanceById": mig.gi_by_id,
        "nvmlGpuInstanceGetComputeInstanceById": lambda gi, ci: SimpleNamespace(gi=gi.gi, ci=ci),
        "nvmlComputeInstanceDestroy": mig.destroy_ci,
        "nvmlGpuInstanceDestroy": mig.destroy_gi,
    }
    for name, fn in patches.items():
        mocker.patch.object(pynvml, name, side_effect=fn)
    driver.mocks["nvmlDeviceGetUUID"].side_effect = uuid
    return mig


def test_an_instance_is_created_listed_and_destroyed(model: MigModel) -> None:
    adapter = gpus()
    made = adapter.create_mig_instance(A100_UUID, "3g.40gb", MigPlacement(4, 4))

    assert (made.mig_uuid, made.gpu_instance_id, made.compute_instance_id) == ("MIG-aaaa-1", 1, 0)
    assert adapter.mig_instances() == [made]
    assert list(adapter.mig_profiles()) == [A100_UUID]

    adapter.destroy_mig_instance(made)
    adapter.destroy_mig_instance(made)  # already gone: nothing to do
    assert model.instances == {} and adapter.mig_instances() == []


def test_a_placement_nvml_does_not_offer_is_refused(model: MigModel) -> None:
    with pytest.raises(MigError, match="invalid placement"):
        gpus().create_mig_instance(A100_UUID, "3g.40gb", MigPlacement(2, 4))
    assert model.instances == {}


def test_a_failed_compute_instance_rolls_the_gpu_instance_back(model: MigModel) -> None:
    model.fail_compute_instance = True
    with pytest.raises(MigError, match=r"3g\.40gb at 0\+4: NVML refused"):
        gpus().create_mig_instance(A100_UUID, "3g.40gb", MigPlacement(0, 4))
    assert model.instances == {}


def test_a_gpu_outside_mig_mode_is_refused_not_switched(model: MigModel) -> None:
    with pytest.raises(MigError, match="not in MIG mode"):
        gpus().create_mig_instance(V100_UUID, "1g.10gb", MigPlacement(0, 1))
    with pytest.raises(MigError, match="not one of this node's GPUs"):
        gpus().create_mig_instance("GPU-elsewhere", "1g.10gb", MigPlacement(0, 1))


@pytest.mark.parametrize(("name", "slices"), [("1g.10gb", 1), ("3g.40gb", 3), ("7g.79gb", 7)])
def test_profile_names_select_nvml_profiles_by_their_slices(name: str, slices: int) -> None:
    assert profile_slices(name) == slices


@pytest.mark.parametrize("name", ["5g.50gb", "g.10gb", "big", "10gb.1g", ""])
def test_names_nvml_has_no_profile_for_are_refused(name: str) -> None:
    with pytest.raises(MigError, match="not a MIG profile name"):
        profile_slices(name)
