"""From an allocated claim to HAMi-core's limits, the CDI spec, the node's ledger and the
record of prepared claims: the pure rules of `vgpu dra-driver`."""

import doctest
import json
import re
from dataclasses import replace
from types import ModuleType

import pytest

from vgpu.domain.device import Usage
from vgpu.domain.dra import (
    AllocationResult,
    DeviceRequestAllocationResult,
    GpuCard,
    ResourceClaim,
    cdi,
    limits,
    node_ledger,
    pod_claims,
    prepared_record,
)
from vgpu.domain.dra.cdi import HamiCoreSetup, claim_spec
from vgpu.domain.dra.limits import ClaimRefused, DeviceShare, claim_shares
from vgpu.domain.dra.node_ledger import GpuHolder, device_plugin_holders, over_capacity
from vgpu.domain.dra.pod_claims import claims_beside
from vgpu.domain.dra.prepared_record import (
    PreparedClaim,
    PreparedRecordError,
    decode_prepared_record,
    encode_prepared_record,
)

MIB = 2**20
DRIVER = "gpu.vgpu.io"
NODE = "gpu-node-1"
CARDS = {
    "gpu-0": GpuCard("GPU-a", 0, "Tesla V100-PCIE-32GB", memory_mib=32768),
    "gpu-1": GpuCard("GPU-b", 1, "Tesla V100-PCIE-32GB", memory_mib=32768),
}
BY_UUID = {card.uuid: card for card in CARDS.values()}


def _result(device: str = "gpu-0", memory: int = 4096 * MIB, cores: int = 30, **kw: object
            ) -> DeviceRequestAllocationResult:
    base = DeviceRequestAllocationResult(
        "gpu", DRIVER, NODE, device, share_id=f"share-{device}",
        consumed_capacity={"memory": memory, "cores": cores},
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def _claim(*results: DeviceRequestAllocationResult, node: str | None = NODE) -> ResourceClaim:
    return ResourceClaim("train", "ml", "uid-1",
                         allocation=AllocationResult(results or (_result(),), node))


@pytest.mark.parametrize("module", [limits, cdi, node_ledger, pod_claims, prepared_record])
def test_the_module_examples_run(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


# claim_shares --------------------------------------------------------------------------------
def test_a_share_carries_its_gpu_and_what_it_consumes() -> None:
    [share] = claim_shares(_claim(), DRIVER, NODE, CARDS)
    assert share == DeviceShare("gpu", NODE, "gpu-0", "share-gpu-0", "GPU-a", 4096 * MIB, 30)
    assert (share.limit_mib, share.charged_mib, share.dir_name) == (4096, 4096, "share-gpu-0")


def test_memory_off_the_mib_grid_is_limited_below_and_charged_above() -> None:
    [share] = claim_shares(_claim(_result(memory=4096 * MIB + 1)), DRIVER, NODE, CARDS)
    assert (share.limit_mib, share.charged_mib) == (4096, 4097)


def test_the_qualified_capacity_names_read_as_the_short_ones() -> None:
    result = _result(consumed_capacity={f"{DRIVER}/memory": 2048 * MIB, f"{DRIVER}/cores": 0})
    [share] = claim_shares(_claim(result), DRIVER, NODE, CARDS)
    assert (share.limit_mib, share.cores) == (2048, 0)


def test_a_device_allocated_without_consumable_capacity_takes_the_whole_gpu() -> None:
    [share] = claim_shares(_claim(_result(consumed_capacity={}, share_id=None)), DRIVER, NODE, CARDS)
    assert (share.limit_mib, share.cores, share.dir_name) == (32768, 100, "gpu-0")


def test_results_of_other_drivers_are_left_to_them_and_the_subrequest_is_dropped() -> None:
    other = DeviceRequestAllocationResult("nic", "net.example.com", NODE, "eth0")
    shares = claim_shares(_claim(other, _result(request="gpu/big")), DRIVER, NODE, CARDS)
    assert [(s.device, s.request_name) for s in shares] == [("gpu-0", "gpu")]


def test_admin_access_gets_the_gpu_and_consumes_nothing() -> None:
    [share] = claim_shares(_claim(_result(admin_access=True)), DRIVER, NODE, CARDS)
    assert (share.admin, share.memory_bytes, share.cores) == (True, 0, 0)


@pytest.mark.parametrize(
    ("claim", "problem"),
    [
        (ResourceClaim("train", "ml", "u"), "claim ml/train is not allocated (no status.allocation)"),
        (_claim(node="gpu-node-2"), "claim ml/train is allocated to node gpu-node-2, not to gpu-node-1"),
        (_claim(DeviceRequestAllocationResult("nic", "net.example.com", NODE, "eth0")),
         "claim ml/train has no device of driver gpu.vgpu.io (its devices are from: net.example.com)"),
        (_claim(_result(pool="gpu-node-2")),
         "claim ml/train, request 'gpu', device gpu-node-2/gpu-0: the pool is not this node's (gpu-node-1)"),
        (_claim(_result(device="gpu-7")),
         "claim ml/train, request 'gpu', device gpu-node-1/gpu-7: not a GPU this node publishes "
         "(published: gpu-0, gpu-1); the GPU may have failed or gone since the claim was allocated"),
        (_claim(_result(memory=512 * 1024)),
         "consumes 524288 bytes of memory, less than HAMi-core's unit of 1 MiB"),
        (_claim(_result(memory=2**62)),
         "consumes 4611686018427387904 bytes of memory, more than the GPU's 32768 MiB"),
        (_claim(_result(cores=150)), "consumes 150% cores, more than the GPU's 100%"),
        (_claim(_result(consumed_capacity={"memory": MIB, "cores": 1, "nvlinks": 2})),
         "consumedCapacity['nvlinks']: 2 is a capacity gpu.vgpu.io does not publish"),
        (_claim(_result(consumed_capacity={"memory": MIB})), "consumedCapacity: {'memory': 1048576} has no cores"),
        (_claim(_result(), _result(device="gpu-1", admin_access=True)),
         "claim ml/train mixes adminAccess devices and limited devices of gpu.vgpu.io"),
    ],
)
def test_a_claim_this_node_cannot_prepare_says_why(claim: ResourceClaim, problem: str) -> None:
    with pytest.raises(ClaimRefused, match=re.escape(problem)):
        claim_shares(claim, DRIVER, NODE, CARDS)


# the CDI spec --------------------------------------------------------------------------------
SETUP = HamiCoreSetup(hook_path="/usr/local", lock_dir="/tmp/vgpulock")
SHARE_A = DeviceShare("gpu", NODE, "gpu-0", "s1", "GPU-a", 4096 * MIB, 30)
SHARE_B = DeviceShare("gpu", NODE, "gpu-1", "s2", "GPU-b", 8192 * MIB, 50)
INDEX = {"GPU-a": 0, "GPU-b": 1}
DIRS = {"s1": "/usr/local/vgpu/claims/uid-1/s1", "s2": "/usr/local/vgpu/claims/uid-1/s2"}
CDI_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")  # the CDI parser's rule


def _valid_for_the_cdi_tools(spec: dict[str, object]) -> None:
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == "vgpu.io/claim"
    for device in spec["devices"]:  # type: ignore[attr-defined]
        assert CDI_NAME.match(device["name"]), device["name"]
        edits = device["containerEdits"]
        assert edits.get("env") or edits.get("mounts")  # a device's edits may not be empty
        for env in edits.get("env", []) + spec["containerEdits"].get("env", []):  # type: ignore[attr-defined]
            assert env.index("=") > 0
        for mount in edits.get("mounts", []):
            assert mount["hostPath"] and mount["containerPath"]


def test_one_share_gets_its_limits_its_cache_dir_and_hami_core() -> None:
    made = claim_spec("uid-1", [SHARE_A], SETUP, DIRS, {}, INDEX)
    _valid_for_the_cdi_tools(made.spec)
    assert made.cdi_ids == (("vgpu.io/claim=uid-1-gpu-0-s1",),)
    [device] = made.spec["devices"]  # type: ignore[misc]
    assert device["name"] == "uid-1-gpu-0-s1"
    assert device["containerEdits"]["env"] == [
        "VGPU_DRA_DEVICE_0=GPU-a",
        "CUDA_DEVICE_MEMORY_LIMIT_0=4096m",
        "CUDA_DEVICE_SM_LIMIT_0=30",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/claims/uid-1/s1/vgpu.cache",
    ]
    assert device["containerEdits"]["mounts"] == [
        {"hostPath": DIRS["s1"], "containerPath": DIRS["s1"], "type": "bind",
         "options": ["rw", "nosuid", "nodev", "bind"]}
    ]
    claim_edits = made.spec["containerEdits"]
    assert claim_edits["env"] == [  # type: ignore[index]
        "NVIDIA_VISIBLE_DEVICES=GPU-a",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "CUDA_DEVICE_MEMORY_LIMIT=4096m",
        "CUDA_DEVICE_SM_LIMIT=30",
    ]
    assert [(m["containerPath"], m["hostPath"], m["options"][0]) for m in claim_edits["mounts"]] == [  # type: ignore[index]
        ("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", "ro"),
        ("/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", "ro"),
        ("/tmp/vgpulock", "/tmp/vgpulock", "rw"),
    ]


def test_limits_are_indexed_by_the_gpus_order_on_the_node_and_the_default_is_the_smallest(
) -> None:
    made = claim_spec("uid-1", [SHARE_B, SHARE_A], SETUP, DIRS, {}, INDEX)
    envs = [d["containerEdits"]["env"] for d in made.spec["devices"]]  # type: ignore[attr-defined]
    assert envs[0][1:3] == ["CUDA_DEVICE_MEMORY_LIMIT_1=8192m", "CUDA_DEVICE_SM_LIMIT_1=50"]
    assert envs[1][1:3] == ["CUDA_DEVICE_MEMORY_LIMIT_0=4096m", "CUDA_DEVICE_SM_LIMIT_0=30"]
    assert made.spec["containerEdits"]["env"][:4] == [  # type: ignore[index]
        "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "CUDA_DEVICE_MEMORY_LIMIT=4096m",
        "CUDA_DEVICE_SM_LIMIT=30",
    ]


def test_nvidias_cdi_device_is_returned_when_its_spec_has_every_gpu_of_the_claim() -> None:
    nvidia = {"GPU-a": "nvidia.com/gpu=GPU-a", "GPU-b": "nvidia.com/gpu=1"}
    made = claim_spec("uid-1", [SHARE_A, SHARE_B], SETUP, DIRS, nvidia, INDEX)
    assert made.cdi_ids == (
        ("vgpu.io/claim=uid-1-gpu-0-s1", "nvidia.com/gpu=GPU-a"),
        ("vgpu.io/claim=uid-1-gpu-1-s2", "nvidia.com/gpu=1"),
    )
    assert not any(e.startswith("NVIDIA_VISIBLE_DEVICES") for e in made.spec["containerEdits"]["env"])  # type: ignore[index]
    partial = claim_spec("uid-1", [SHARE_A, SHARE_B], SETUP, DIRS, {"GPU-a": "nvidia.com/gpu=0"}, INDEX)
    assert partial.cdi_ids == (("vgpu.io/claim=uid-1-gpu-0-s1",), ("vgpu.io/claim=uid-1-gpu-1-s2",))
    assert partial.spec["containerEdits"]["env"][0] == "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"  # type: ignore[index]


def test_an_admin_claim_sees_its_gpu_without_hami_core() -> None:
    admin = DeviceShare("gpu", NODE, "gpu-0", None, "GPU-a", 0, 0, admin=True)
    made = claim_spec("uid-9", [admin], SETUP, {}, {}, INDEX)
    _valid_for_the_cdi_tools(made.spec)
    assert made.spec["devices"] == [  # no limit, no cache, no preload
        {"name": "uid-9-gpu-0", "containerEdits": {"env": ["VGPU_DRA_DEVICE_0=GPU-a"]}}
    ]
    assert made.spec["containerEdits"] == {"env": ["NVIDIA_VISIBLE_DEVICES=GPU-a"]}


def test_node_switches_reach_the_spec() -> None:
    setup = replace(SETUP, libvgpu_host_path="/usr/local/vgpu/libvgpu.so.0.1.0",
                    lock_dir="/var/lock/vgpu", license_present=True, disable_core_limit=True,
                    cuda_log_level="4")
    edits = claim_spec("uid-1", [SHARE_A], setup, DIRS, {}, INDEX).spec["containerEdits"]
    assert edits["env"][-2:] == ["GPU_CORE_UTILIZATION_POLICY=disable", "LIBCUDA_LOG_LEVEL=4"]  # type: ignore[index]
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}  # type: ignore[index]
    assert mounts["/usr/local/vgpu/libvgpu.so"] == "/usr/local/vgpu/libvgpu.so.0.1.0"
    assert mounts["/tmp/vgpulock"] == "/var/lock/vgpu"
    assert mounts["/tmp/license"] == "/usr/local/vgpu/license"


# several claims in one container -------------------------------------------------------------
def test_containers_sharing_a_claim_with_another_are_found_init_containers_too() -> None:
    pod = {
        "spec": {
            "resourceClaims": [{"name": "a", "resourceClaimName": "gpu-a"},
                               {"name": "b", "resourceClaimName": "gpu-b"},
                               {"name": "c", "resourceClaimTemplateName": "t"}],
            "initContainers": [{"name": "warm", "resources": {"claims": [{"name": "a"}, {"name": "c"}]}}],
            "containers": [
                {"name": "alone", "resources": {"claims": [{"name": "a"}]}},
                {"name": "both", "resources": {"claims": [{"name": "a", "request": "x"}, {"name": "b"}]}},
                {"name": "other", "resources": {"claims": [{"name": "b"}, {"name": "c"}]}},
            ],
        },
        "status": {"resourceClaimStatuses": [{"name": "c", "resourceClaimName": "p-c-7"}]},
    }
    assert claims_beside(pod, "gpu-a") == {"warm": ("p-c-7",), "both": ("gpu-b",)}
    assert claims_beside(pod, "gpu-b") == {"both": ("gpu-a",), "other": ("p-c-7",)}


@pytest.mark.parametrize("pod", [{}, {"spec": []}, {"spec": {"containers": "x"}},
                                 {"spec": {"containers": [{"resources": {"claims": [7]}}]}}])
def test_a_pod_that_does_not_read_names_no_container(pod: dict[str, object]) -> None:
    assert claims_beside(pod, "gpu-a") == {}


# the node's ledger ---------------------------------------------------------------------------
def test_a_claim_that_fits_beside_what_others_hold_is_not_refused() -> None:
    held = [GpuHolder("claim ml/a", {"GPU-a": Usage(1, 28672, 70)})]
    assert over_capacity("ml/new", [SHARE_A], BY_UUID, held) is None


def test_memory_or_cores_past_the_gpu_refuses_and_names_every_holder() -> None:
    held = [GpuHolder("claim ml/a", {"GPU-a": Usage(1, 20000, 20)}),
            GpuHolder("pod ml/old (served by the device plugin)", {"GPU-a": Usage(1, 10000, 0)}),
            GpuHolder("claim ml/elsewhere", {"GPU-b": Usage(1, 32768, 100)})]
    assert over_capacity("ml/new", [SHARE_A], BY_UUID, held) == (
        "claim ml/new: GPU GPU-a (gpu-0) would be over capacity: the claim needs 4096 MiB and "
        "30% cores, 30000 MiB and 20% are held (claim ml/a, pod ml/old (served by the device "
        "plugin)), the GPU has 32768 MiB and 100%"
    )
    cores = [GpuHolder("claim ml/a", {"GPU-a": Usage(1, 0, 80)})]
    assert "needs 4096 MiB and 30% cores" in str(over_capacity("ml/new", [SHARE_A], BY_UUID, cores))


def test_two_shares_of_one_claim_on_one_gpu_add_up_and_admin_holds_nothing() -> None:
    twice = [SHARE_A, replace(SHARE_A, share_id="s3", memory_bytes=29000 * MIB, cores=10)]
    assert "needs 33096 MiB and 40% cores" in str(over_capacity("ml/new", twice, BY_UUID, []))
    admin = replace(SHARE_A, admin=True, memory_bytes=0, cores=0)
    full = [GpuHolder("claim ml/a", {"GPU-a": Usage(1, 32768, 100)})]
    assert over_capacity("ml/admin", [admin], BY_UUID, full) is None


def test_a_share_without_a_compute_limit_never_joins_a_gpu_whose_compute_is_all_held() -> None:
    # cores 0 is HAMi's "no compute limit": it consumes no cores, so capacity alone lets it
    # onto a GPU a claim of 100% holds, where it would run unthrottled beside it
    unlimited = replace(SHARE_A, cores=0)
    exclusive = [GpuHolder("claim ml/all-compute", {"GPU-a": Usage(1, 1000, 100)})]
    assert over_capacity("ml/new", [unlimited], BY_UUID, exclusive) == (
        "claim ml/new: GPU GPU-a (gpu-0): its compute is all held (100% by claim "
        "ml/all-compute), and a share with no compute limit (cores 0) would run beside it "
        "unthrottled"
    )
    some = [GpuHolder("claim ml/part", {"GPU-a": Usage(1, 1000, 60)})]
    assert over_capacity("ml/new", [unlimited], BY_UUID, some) is None


def test_a_share_of_all_the_compute_wants_the_gpu_to_itself() -> None:
    everything = replace(SHARE_A, cores=100)
    unthrottled = [GpuHolder("pod ml/old (served by the device plugin)", {"GPU-a": Usage(1, 1000, 0)})]
    assert over_capacity("ml/new", [everything], BY_UUID, unthrottled) == (
        "claim ml/new: GPU GPU-a (gpu-0): the claim takes all its compute (100%), which needs "
        "the GPU to itself, and it is held (pod ml/old (served by the device plugin))"
    )
    assert over_capacity("ml/new", [everything], BY_UUID, []) is None


def test_the_device_plugins_pods_count_by_its_record_first_then_the_kubelets() -> None:
    live = {"u1": "ml/served", "u2": "ml/hami", "u3": "ml/cpu-only"}
    served = {"u1": {"GPU-a": Usage(1, 1000, 10)}, "u9": {"GPU-a": Usage(1, 9999, 99)}}
    checkpoint = {"u1": {"GPU-a": Usage(1, 32768, 100)}, "u2": {"GPU-b": Usage(1, 2000, 0)}}
    assert device_plugin_holders(live, served, checkpoint) == [
        GpuHolder("pod ml/served (served by the device plugin)", {"GPU-a": Usage(1, 1000, 10)}),
        GpuHolder("pod ml/hami (in the kubelet's device checkpoint)", {"GPU-b": Usage(1, 2000, 0)}),
    ]


# the prepared record -------------------------------------------------------------------------
CLAIM = PreparedClaim("uid-1", "ml", "train", (SHARE_A, SHARE_B),
                      (("vgpu.io/claim=uid-1-gpu-0-s1",), ("vgpu.io/claim=uid-1-gpu-1-s2",)),
                      {"kind": "vgpu.io/claim"}, "2026-01-02T03:04:05Z")


def test_the_record_reads_back_what_was_written() -> None:
    admin = PreparedClaim("uid-2", "ops", "debug", (replace(SHARE_A, share_id=None, admin=True),),
                          (("vgpu.io/claim=uid-2-gpu-0",),), {"kind": "vgpu.io/claim"})
    text = encode_prepared_record(NODE, DRIVER, [CLAIM, admin])
    assert decode_prepared_record(text) == (NODE, DRIVER, [CLAIM, admin])
    assert CLAIM.footprint() == {"GPU-a": Usage(1, 4096, 30), "GPU-b": Usage(1, 8192, 50)}
    assert admin.footprint() == {}


def _damaged(change: object) -> str:
    record = json.loads(encode_prepared_record(NODE, DRIVER, [CLAIM]))
    change(record)  # type: ignore[operator]
    return json.dumps(record)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not JSON"),
        ("[]", "not a version 1 record"),
        (_damaged(lambda r: r.update(version=2)), "not a version 1 record"),
        (_damaged(lambda r: r.update(claims=[])), "needs a string 'node', a string 'driver', an object 'claims'"),
        (_damaged(lambda r: r["claims"]["uid-1"].update(shares=[])), "claims.'uid-1': needs a non-empty list 'shares'"),
        (_damaged(lambda r: r["claims"]["uid-1"]["shares"][0].update(memoryBytes=-1)),
         "claims.'uid-1'.shares[0].memoryBytes: -1 is not a whole number"),
        (_damaged(lambda r: r["claims"]["uid-1"]["shares"][1].update(cdiIDs=[])),
         "claims.'uid-1'.shares[1].cdiIDs: must be a non-empty list of strings"),
        (_damaged(lambda r: r["claims"]["uid-1"]["shares"][0].update(admin="yes")),
         "claims.'uid-1'.shares[0].admin: 'yes' is not true or false"),
        (_damaged(lambda r: r["claims"]["uid-1"].update(name="")), "claims.'uid-1'.name: '' is not a name"),
    ],
)
def test_a_damaged_record_is_refused_naming_the_field(text: str, problem: str) -> None:
    with pytest.raises(PreparedRecordError, match=re.escape(problem)):
        decode_prepared_record(text)
