"""`vgpu dra-driver` end to end: the real process, the API emulator serving resource.k8s.io/v1
and a fake kubelet over the real unix sockets."""

import json
import os

import kubernetes_validate

from tests.e2e.dra.harness import DriverEnv, gpu_file_text, wait_until
from tests.unit.dra_driver.node import DRIVER, MIB, NODE, UUID_A, UUID_B, claim_json, share
from vgpu.domain.dra import parse_resource_slice


def _env(spec: dict[str, object]) -> list[str]:
    return [e for d in spec["devices"] for e in d["containerEdits"]["env"]]  # type: ignore[attr-defined]


def test_it_registers_with_the_kubelet_and_publishes_a_valid_slice(driver_env: DriverEnv) -> None:
    driver_env.start()

    info = driver_env.kubelet.discover()

    assert (info.type, info.name) == ("DRAPlugin", DRIVER)
    assert info.endpoint == str(driver_env.dir("plugin") / "dra.sock")
    assert list(info.supported_versions) == [
        "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"
    ]
    assert driver_env.wait_for_log("the kubelet registered DRA driver gpu.vgpu.io")
    assert wait_until(lambda: bool(driver_env.slices()))
    [manifest] = driver_env.slices()
    for version in ("1.34", "1.36"):  # the emulator checked it on write too
        kubernetes_validate.validate(manifest, version, strict=True)
    read = parse_resource_slice(manifest)
    assert (read.driver, read.node_name, read.pool.name) == (DRIVER, NODE, NODE)
    gpu = read.devices[0]
    assert gpu.name == "gpu-0" and gpu.allow_multiple_allocations
    assert {k: str(v) for k, v in gpu.attributes.items() if k in ("uuid", "architecture",
                                                                      "pciBusID")} == {
        "uuid": UUID_A, "architecture": "Volta", "pciBusID": "0000:3b:00.0"
    }
    assert set(gpu.capacity) == {"memory", "cores"}


def test_a_claim_allocated_by_the_scheduler_is_prepared_with_its_limits_and_unprepared(
    driver_env: DriverEnv,
) -> None:
    driver_env.start_registered()
    assert wait_until(lambda: bool(driver_env.slices()))
    # asks 4000 MiB (rounded up to whole MiB by the policy) and 30% of the cores
    claim = driver_env.schedule("train", {"memory": 4000 * MIB, "cores": 30})
    uid = claim[2]

    answer = driver_env.kubelet.prepare(claim)[uid]

    assert answer.error == ""
    [(requests, pool, device, cdi_ids, share_id)] = answer.devices
    assert (requests, pool, device) == (("gpu",), NODE, "gpu-0")
    assert share_id and cdi_ids == (f"vgpu.io/claim={uid}-gpu-0-{share_id}",)
    spec = driver_env.spec(uid)
    assert spec is not None and spec["kind"] == "vgpu.io/claim"
    assert [
        e for e in _env(spec) if e.startswith(("CUDA_DEVICE_MEMORY_LIMIT_", "CUDA_DEVICE_SM"))
    ] == ["CUDA_DEVICE_MEMORY_LIMIT_0=4000m", "CUDA_DEVICE_SM_LIMIT_0=30"]
    cache_dir = driver_env.dir("hook") / "vgpu" / "claims" / uid / share_id
    assert f"CUDA_DEVICE_MEMORY_SHARED_CACHE={cache_dir}/vgpu.cache" in _env(spec)
    assert cache_dir.is_dir()
    assert spec["containerEdits"]["env"][0] == f"NVIDIA_VISIBLE_DEVICES={UUID_A}"

    assert driver_env.kubelet.unprepare(claim) == {uid: ""}
    assert driver_env.spec(uid) is None
    assert not (driver_env.dir("hook") / "vgpu" / "claims" / uid).exists()


def test_prepare_is_idempotent_across_a_kill_9_and_still_counts_the_claim(
    driver_env: DriverEnv,
) -> None:
    process = driver_env.start_registered()
    assert wait_until(lambda: bool(driver_env.slices()))
    big = driver_env.schedule("big", {"memory": 30000 * MIB, "cores": 80}, count=2)
    first = driver_env.kubelet.prepare(big)
    assert [d[2] for d in first[big[2]].devices] == ["gpu-0", "gpu-1"]
    spec = driver_env.spec(big[2])

    driver_env.kill(process)
    driver_env.start_registered()

    assert driver_env.kubelet.prepare(big) == first
    assert driver_env.spec(big[2]) == spec
    # the restarted driver still counts it, whatever a scheduler that missed it allocates
    other = driver_env.schedule("other", {"memory": 4096 * MIB, "cores": 10}, sees_others=False)
    assert "would be over capacity" in driver_env.kubelet.prepare(other)[other[2]].error
    assert driver_env.kubelet.unprepare(big) == {big[2]: ""}
    assert driver_env.kubelet.prepare(other)[other[2]].error == ""


def test_an_allocation_past_the_gpu_is_refused_by_the_nodes_own_count(
    driver_env: DriverEnv,
) -> None:
    driver_env.start_registered()
    assert wait_until(lambda: bool(driver_env.slices()))
    first = driver_env.schedule("first", {"memory": 20000 * MIB, "cores": 50})
    # a second scheduler (or one without consumable capacity) did not count the first claim
    second = driver_env.schedule("second", {"memory": 20000 * MIB, "cores": 50}, sees_others=False)

    answers = driver_env.kubelet.prepare(first, second)

    assert answers[first[2]].error == ""
    assert answers[second[2]].error == (
        f"claim ml/second: GPU {UUID_A} (gpu-0) would be over capacity: the claim needs 20000 "
        "MiB and 50% cores, 20000 MiB and 50% are held (claim ml/first (prepared here)), the GPU "
        "has 32768 MiB and 100%"
    )
    assert driver_env.spec(second[2]) is None


def test_shares_of_one_gpu_and_a_claim_for_two_pods(driver_env: DriverEnv) -> None:
    driver_env.start_registered()
    assert wait_until(lambda: bool(driver_env.slices()))
    claims = [
        driver_env.schedule(f"share-{i}", {"memory": 8000 * MIB, "cores": 25},
                            pods=(f"p{i}a", f"p{i}b"))
        for i in range(6)
    ]

    answers = driver_env.kubelet.prepare(*claims)

    assert [answers[c[2]].error for c in claims] == [""] * 6
    # the scheduler put four shares on gpu-0 (cores run out) and the rest on gpu-1
    assert [answers[c[2]].devices[0][2] for c in claims] == ["gpu-0"] * 4 + ["gpu-1"] * 2
    assert len({answers[c[2]].devices[0][4] for c in claims}) == 6  # a share id each
    caches = {
        next(e for e in _env(driver_env.spec(c[2]) or {}) if "SHARED_CACHE" in e) for c in claims
    }
    assert len(caches) == 6  # one HAMi-core region per share, shared by the claim's two pods
    info = json.loads(
        (driver_env.dir("hook") / "vgpu" / "claims" / claims[0][2] / "claim.json").read_text()
    )
    assert [p["name"] for p in info["reservedFor"]] == ["p0a", "p0b"]


def test_bad_claims_get_clear_errors_and_nothing_is_lost(driver_env: DriverEnv) -> None:
    driver_env.start_registered()
    good = driver_env.claim(claim_json("good"))
    garbage = claim_json("garbage")
    garbage["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = "lots"
    negative = claim_json("negative")
    negative["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] = "-5Gi"
    huge = claim_json("huge")
    huge["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] = "1e30"
    unknown = claim_json("unknown")
    unknown["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["encoders"] = "1"
    other_node = claim_json("other-node", node="gpu-node-2")
    other_driver = claim_json("other-driver", share(driver="gpu.nvidia.com"))
    bad = [driver_env.claim(m) for m in (garbage, negative, huge, unknown, other_node, other_driver)]

    answers = driver_env.kubelet.prepare(good, *bad)

    assert answers[good[2]].error == ""
    errors = [answers[c[2]].error for c in bad]
    assert errors == [
        "ResourceClaim ml/garbage: status.allocation.devices.results[0].consumedCapacity: 'lots' "
        "is not an object",
        "ResourceClaim ml/negative: status.allocation.devices.results[0].consumedCapacity.memory: "
        "'-5Gi' is negative",
        "ResourceClaim ml/huge: status.allocation.devices.results[0].consumedCapacity.memory: "
        "'1e30' is too large (at most 9223372036854775807)",
        "claim ml/unknown: allocation result 'gpu' (gpu-node-1/gpu-0): "
        "consumedCapacity['encoders']: 1 is a capacity gpu.vgpu.io does not publish (it "
        "publishes memory, cores)",
        "claim ml/other-node is allocated to node gpu-node-2, not to gpu-node-1",
        "claim ml/other-driver has no device of driver gpu.vgpu.io (its devices are from: "
        "gpu.nvidia.com)",
    ]
    assert all(driver_env.spec(c[2]) is None for c in bad)
    assert driver_env.kubelet.prepare(good)[good[2]].error == ""  # the good one is intact


def test_a_cdi_dir_that_cannot_be_written_fails_the_claim_not_the_driver(
    driver_env: DriverEnv,
) -> None:
    driver_env.dir("cdi").write_text("not a directory")
    driver_env.start_registered()
    claim = driver_env.claim(claim_json("train"))

    answer = driver_env.kubelet.prepare(claim)[claim[2]]

    assert answer.error.startswith(f"cannot write CDI spec {driver_env.dir('cdi')}/")
    assert answer.error.endswith(": File exists")  # a file where the directory should be
    driver_env.dir("cdi").unlink()
    assert driver_env.kubelet.prepare(claim)[claim[2]].error == ""  # fixed: it prepares


def test_an_unhealthy_gpu_leaves_the_slice_and_the_kubelet_hears_of_it(
    driver_env: DriverEnv,
) -> None:
    driver_env.start_registered()
    driver_env.kubelet.watch_health()
    assert wait_until(lambda: driver_env.kubelet.health_of("gpu-1") == 1)
    assert wait_until(lambda: len(_devices(driver_env)) == 2)

    driver_env.gpu_file.write_text(gpu_file_text(healthy_b=False))

    assert wait_until(lambda: driver_env.kubelet.health_of("gpu-1") == 2)  # UNHEALTHY
    assert wait_until(lambda: _devices(driver_env) == ["gpu-0"])
    generation = driver_env.slices()[0]["spec"]["pool"]["generation"]
    assert generation == 2
    claim = driver_env.claim(claim_json("late", share("gpu-1")))
    assert "is unhealthy: Xid 79 (fallen off the bus)" in driver_env.kubelet.prepare(claim)[claim[2]].error
    assert UUID_B in driver_env.log()


def test_a_v1beta1_kubelet_gets_the_same_answer_without_share_ids(driver_env: DriverEnv) -> None:
    driver_env.start_registered()
    claim = driver_env.claim(claim_json("train"))

    answer = driver_env.kubelet.prepare(claim, beta=True)[claim[2]]

    assert (answer.error, answer.devices[0][2], answer.devices[0][4]) == ("", "gpu-0", None)


def test_its_sockets_are_served_again_when_removed(driver_env: DriverEnv) -> None:
    driver_env.start_registered()
    os.unlink(driver_env.dir("registry") / f"{DRIVER}-reg.sock")

    assert driver_env.wait_for_log("sockets were removed; serving them again")
    assert driver_env.kubelet.discover().name == DRIVER


def _devices(env: DriverEnv) -> list[str]:
    found = env.slices()
    return [d["name"] for d in found[0]["spec"].get("devices", [])] if found else []
