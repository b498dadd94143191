"""Preparing and unpreparing claims on one node, the driver built by its own container with
an in-memory API, fake GPUs and its host files in a temporary directory."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.dra_driver.node import (
    NODE,
    UUID_A,
    UUID_B,
    DraNode,
    claim_json,
    make_node,
    ref,
    share,
)
from vgpu.domain.pod import Container, Pod, PodClaim
from vgpu.domain.trust import ServedGrant, encode_served_record
from vgpu.ports.dra import ClaimOutcome, HostFileError, PreparedDevice


@pytest.fixture()
def node(tmp_path: Path) -> DraNode:
    return make_node(tmp_path)


def _prepare(node: DraNode, *manifests: dict[str, object]) -> dict[str, ClaimOutcome]:
    for manifest in manifests:
        node.api.put_claim(manifest)
    return node.preparer.prepare([ref(m) for m in manifests])


def _env(spec: dict[str, object]) -> list[str]:
    devices = spec["devices"]
    return [e for d in devices for e in d["containerEdits"]["env"]]  # type: ignore[attr-defined]


def test_a_prepared_claim_gets_its_cdi_ids_and_a_spec_with_its_limits(node: DraNode) -> None:
    claim = claim_json("train", share(memory_mib=4096, cores=30))

    outcome = _prepare(node, claim)["uid-train"]

    share_id = "5b1e2d7a-1111-4c5e-9a0b-000000000001"
    assert outcome == ClaimOutcome(
        devices=(
            PreparedDevice(("gpu",), NODE, "gpu-0", (f"vgpu.io/claim=uid-train-gpu-0-{share_id}",),
                           share_id),
        )
    )
    spec = node.spec("uid-train")
    assert spec is not None
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=4096m" in _env(spec)
    assert "CUDA_DEVICE_SM_LIMIT_0=30" in _env(spec)
    assert spec["containerEdits"]["env"][0] == f"NVIDIA_VISIBLE_DEVICES={UUID_A}"
    claim_file = node.root / "hook" / "vgpu" / "claims" / "uid-train" / "claim.json"
    info = json.loads(claim_file.read_text())
    assert info["claim"] == {"namespace": "ml", "name": "train", "uid": "uid-train"}
    assert info["shares"][0]["shareID"] == share_id
    assert (node.root / "hook" / "vgpu" / "claims" / "uid-train" / share_id).is_dir()


def test_preparing_again_answers_the_same_and_writes_nothing_new(node: DraNode) -> None:
    claim = claim_json("train")
    first = _prepare(node, claim)
    saves = node.container.prepared().saves

    assert node.preparer.prepare([ref(claim)]) == first
    assert node.container.prepared().saves == saves


def test_a_lost_spec_is_written_again_by_a_repeated_prepare(node: DraNode) -> None:
    claim = claim_json("train")
    _prepare(node, claim)
    spec = node.spec("uid-train")
    node.container.cdi_specs().remove("uid-train")

    node.preparer.prepare([ref(claim)])

    assert node.spec("uid-train") == spec


def test_unprepare_removes_spec_dirs_and_record_and_frees_the_gpu(node: DraNode) -> None:
    big = claim_json("big", share(memory_mib=30000, cores=100))
    _prepare(node, big)

    assert node.preparer.unprepare([ref(big)]) == {"uid-big": ""}

    assert node.spec("uid-big") is None
    assert not (node.root / "hook" / "vgpu" / "claims" / "uid-big").exists()
    assert node.container.prepared().entries() == {}
    again = claim_json("again", share(memory_mib=30000, cores=100))
    assert _prepare(node, again)["uid-again"].error == ""
    # unpreparing what is not prepared is done already
    assert node.preparer.unprepare([ref(big)]) == {"uid-big": ""}


def test_a_claim_past_the_gpus_capacity_is_refused_and_leaves_nothing(node: DraNode) -> None:
    _prepare(node, claim_json("a", share(memory_mib=20000, cores=50)))

    refused = _prepare(node, claim_json("b", share(memory_mib=20000, cores=10, share_id="s2")))

    assert refused["uid-b"].error == (
        f"claim ml/b: GPU {UUID_A} (gpu-0) would be over capacity: the claim needs 20000 MiB and "
        "10% cores, 20000 MiB and 50% are held (claim ml/a (prepared here)), the GPU has 32768 "
        "MiB and 100%"
    )
    assert node.spec("uid-b") is None
    assert not (node.root / "hook" / "vgpu" / "claims" / "uid-b").exists()
    # the other GPU is free
    assert _prepare(node, claim_json("c", share("gpu-1", 20000, 10)))["uid-c"].error == ""


def test_several_shares_of_one_gpu_fit_until_cores_run_out(node: DraNode) -> None:
    outcomes = [
        _prepare(node, claim_json(f"s{i}", share(memory_mib=2000, cores=30, share_id=f"sh{i}")))
        for i in range(4)
    ]
    assert [o[f"uid-s{i}"].error == "" for i, o in enumerate(outcomes)] == [True, True, True, False]
    assert "the claim needs 2000 MiB and 30% cores, 6000 MiB and 90% are held" in outcomes[3][
        "uid-s3"
    ].error


def test_one_bad_claim_never_fails_the_others_in_the_same_call(node: DraNode) -> None:
    good = claim_json("good")
    other_node = claim_json("elsewhere", node="gpu-node-2")
    garbage = {**claim_json("garbage"), "status": {"allocation": {"devices": {"results": "x"}}}}
    missing = claim_json("missing")
    for manifest in (good, other_node, garbage):
        node.api.put_claim(manifest)

    outcomes = node.preparer.prepare([ref(m) for m in (good, other_node, garbage, missing)])

    assert outcomes["uid-good"].error == ""
    assert outcomes["uid-elsewhere"].error == (
        "claim ml/elsewhere is allocated to node gpu-node-2, not to gpu-node-1"
    )
    assert outcomes["uid-garbage"].error == (
        "ResourceClaim ml/garbage: status.allocation.devices.results: 'x' is not a list"
    )
    assert outcomes["uid-missing"].error == "claim ml/missing does not exist (deleted?)"


def test_a_claim_made_again_under_the_same_name_is_not_the_one_the_kubelet_named(
    node: DraNode,
) -> None:
    node.api.put_claim(claim_json("train", uid="new-uid"))
    outcome = node.preparer.prepare([ref(claim_json("train", uid="old-uid"))])
    assert outcome["old-uid"].error == (
        "claim ml/train has uid new-uid, not old-uid: it was deleted and made again"
    )


def test_the_device_plugins_running_pods_count_until_they_end(node: DraNode) -> None:
    grant = ServedGrant("pod-uid-1", "ml/old", f"{UUID_A},NVIDIA,30000,60:;")
    state = node.root / "state"
    state.mkdir()
    (state / "served.json").write_text(encode_served_record(NODE, [grant]))
    pod = Pod("ml", "old", "pod-uid-1", containers=(Container("main"),), node_name=NODE,
              phase="Running")
    node.cluster.put_pod(pod)

    refused = _prepare(node, claim_json("new", share(memory_mib=4096, cores=30)))

    assert "30000 MiB and 60% are held (pod ml/old (served by the device plugin))" in refused[
        "uid-new"
    ].error
    node.cluster.put_pod(Pod("ml", "old", "pod-uid-1", node_name=NODE, phase="Succeeded"))
    assert node.preparer.prepare([ref(claim_json("new", share()))])["uid-new"].error == ""


def test_pods_the_kubelets_device_checkpoint_lists_count_too(node: DraNode) -> None:
    checkpoint = {
        "Data": {
            "PodDeviceEntries": [
                {"PodUID": "hami-pod", "ContainerName": "main", "ResourceName": "nvidia.com/gpu",
                 "DeviceIDs": {"-1": [f"{UUID_B}-3"]}, "AllocResp": ""}
            ],
            "RegisteredDevices": {},
        },
        "Checksum": 0,
    }
    folder = node.root / "device-plugins"
    folder.mkdir()
    (folder / "kubelet_internal_checkpoint").write_text(json.dumps(checkpoint))
    node.cluster.put_pod(Pod("ml", "hami", "hami-pod", node_name=NODE, phase="Running"))

    outcome = _prepare(node, claim_json("new", share("gpu-1", 1000, 0)))

    # no answer kept: the pod is counted as holding the whole GPU
    assert "32768 MiB and 100% are held (pod ml/hami (in the kubelet's device checkpoint))" in (
        outcome["uid-new"].error
    )


def test_a_claim_in_a_container_beside_another_of_ours_is_refused(node: DraNode) -> None:
    first = claim_json("first", pods=(("p", "pod-uid"),))
    second = claim_json("second", share("gpu-1", share_id="s2"), pods=(("p", "pod-uid"),))
    node.api.put_pod({
        "metadata": {"name": "p", "namespace": "ml", "uid": "pod-uid"},
        "spec": {
            "resourceClaims": [{"name": "a", "resourceClaimName": "first"},
                               {"name": "b", "resourceClaimName": "second"}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "a"}, {"name": "b"}]}}],
        },
    })

    outcomes = _prepare(node, first, second)

    assert outcomes["uid-first"].error == (
        "claim ml/first: container main of pod p also uses claim second with GPUs of "
        "gpu.vgpu.io; HAMi-core reads one set of limits per container, so the two claims' "
        "limits would overwrite each other: ask for every GPU of the container in one claim"
    )
    assert outcomes["uid-second"].error.startswith("claim ml/second: container main of pod p")


def test_two_pods_with_a_container_each_share_one_claim(node: DraNode) -> None:
    claim = claim_json("shared", pods=(("p1", "u1"), ("p2", "u2")))
    for pod, uid in (("p1", "u1"), ("p2", "u2")):
        node.api.put_pod({
            "metadata": {"name": pod, "namespace": "ml", "uid": uid},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}],
                     "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]},
        })

    assert _prepare(node, claim)["uid-shared"].error == ""
    info = json.loads(
        (node.root / "hook" / "vgpu" / "claims" / "uid-shared" / "claim.json").read_text()
    )
    assert [p["name"] for p in info["reservedFor"]] == ["p1", "p2"]


def test_an_unhealthy_gpu_is_not_handed_out(node: DraNode) -> None:
    node.gpus.mark_unhealthy(UUID_A, "Xid 79 (fallen off the bus)")
    node.container.gpus().apply(node.gpus.wait_for_health_events(0))

    outcome = _prepare(node, claim_json("train"))

    assert outcome["uid-train"].error == (
        f"claim ml/train: GPU gpu-0 ({UUID_A}) is unhealthy: Xid 79 (fallen off the bus)"
    )


def test_a_cdi_dir_that_cannot_be_written_is_a_per_claim_error_and_nothing_stays(
    node: DraNode,
) -> None:
    blocker = node.root / "cdi"
    blocker.write_text("a file where the CDI directory should be")

    outcome = _prepare(node, claim_json("train"))

    assert outcome["uid-train"].error.startswith(f"cannot write CDI spec {blocker}/")
    assert node.container.prepared().entries() == {}
    assert not (node.root / "hook" / "vgpu" / "claims" / "uid-train").exists()


def test_a_record_that_cannot_be_saved_leaves_no_spec_behind(node: DraNode) -> None:
    store = node.container.prepared_store()

    def disk_full(text: str) -> None:
        raise HostFileError(f"cannot write {store.location}: No space left on device")

    store.save = disk_full  # type: ignore[method-assign]
    outcome = _prepare(node, claim_json("train"))

    assert outcome["uid-train"].error.endswith("dra-prepared.json: No space left on device")
    assert node.spec("uid-train") is None
    assert not (node.root / "hook" / "vgpu" / "claims" / "uid-train").exists()
    assert node.container.prepared().entries() == {}


def test_nvidias_cdi_device_is_used_where_its_static_spec_names_the_gpus(tmp_path: Path) -> None:
    node = make_node(tmp_path)
    (tmp_path / "etc-cdi").mkdir()
    (tmp_path / "etc-cdi" / "nvidia.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: '0'\n  - name: '1'\n"
    )
    outcome = _prepare(node, claim_json("train"))
    assert outcome["uid-train"].devices[0].cdi_ids[1] == "nvidia.com/gpu=0"
    strict = make_node(tmp_path / "strict", gpu_visibility="cdi")
    refused = _prepare(strict, claim_json("train"))
    assert "no nvidia.com/gpu CDI device for GPU" in refused["uid-train"].error


def test_a_restart_restores_lost_specs_and_removes_orphans(node: DraNode, tmp_path: Path) -> None:
    _prepare(node, claim_json("train"))
    spec = node.spec("uid-train")
    specs = node.container.cdi_specs()
    specs.remove("uid-train")
    specs.write("orphan-uid", {"kind": "vgpu.io/claim"})

    restarted = make_node(tmp_path)
    restarted.container.preparer().restore()

    assert restarted.spec("uid-train") == spec
    assert restarted.spec("orphan-uid") is None
    assert list(restarted.container.prepared().entries()) == ["uid-train"]


def test_the_sweeper_releases_claims_that_are_gone(node: DraNode) -> None:
    _prepare(node, claim_json("kept"))
    _prepare(node, claim_json("deleted", share("gpu-1", share_id="s2")))
    _prepare(node, claim_json("remade", share(share_id="s3")))
    node.api.delete_claim("ml", "deleted")
    node.api.put_claim(claim_json("remade", uid="another-uid"))

    assert sorted(node.container.sweeper().sweep()) == ["ml/deleted", "ml/remade"]
    assert list(node.container.prepared().entries()) == ["uid-kept"]
    assert node.spec("uid-deleted") is None


def test_an_unreadable_record_stops_preparing_instead_of_forgetting(node: DraNode) -> None:
    store = node.container.prepared_store()

    def unreadable() -> str:
        raise HostFileError("cannot read dra-prepared.json: Input/output error")

    store.load = unreadable  # type: ignore[method-assign]
    outcome = _prepare(node, claim_json("train"))
    assert outcome["uid-train"].error == "cannot read dra-prepared.json: Input/output error"
    assert node.spec("uid-train") is None


def test_a_full_cdi_dir_fails_the_claim_and_leaves_nothing(node: DraNode) -> None:
    specs = node.container.cdi_specs()

    def full(claim_uid: str, spec: object) -> str:
        raise HostFileError(f"cannot write CDI spec {specs.path(claim_uid)}: No space left on device")

    specs.write = full  # type: ignore[method-assign]
    outcome = _prepare(node, claim_json("train"))

    assert outcome["uid-train"].error.endswith("vgpu.io-claim_uid-train.json: No space left on device")
    assert node.container.prepared().entries() == {}
    assert not (node.root / "hook" / "vgpu" / "claims" / "uid-train").exists()


def test_an_admin_claim_gets_its_gpu_on_a_full_gpu_and_counts_nothing(node: DraNode) -> None:
    assert _prepare(node, claim_json("all", share(memory_mib=32768, cores=100)))["uid-all"].error == ""

    admin = claim_json("debug", share(share_id=None, admin_access=True))
    outcome = _prepare(node, admin)["uid-debug"]

    assert outcome.error == ""
    spec = node.spec("uid-debug")
    assert spec is not None
    assert not any(e.startswith("CUDA_DEVICE_") for e in _env(spec))
    assert "mounts" not in spec["containerEdits"]  # no preload, no HAMi-core
    assert node.container.prepared().entries()["uid-debug"].footprint() == {}


def _gpu_limits(spec: dict[str, object], uuids: list[str]) -> dict[str, str]:
    """The memory limit each GPU gets in a container that uses the whole claim: CUDA numbers
    the visible GPUs in PCI bus order (the NVML index), and HAMi-core's `_<i>` follows it."""
    env: dict[str, str] = {}
    for edits in [spec["containerEdits"], *(d["containerEdits"] for d in spec["devices"])]:  # type: ignore[attr-defined]
        for entry in edits.get("env", []):
            name, _, value = entry.partition("=")
            env[name] = value  # a later device's value replaces an earlier one, as in CDI
    assert env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
    visible = env["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert sorted(visible, key=uuids.index) == visible
    default = env["CUDA_DEVICE_MEMORY_LIMIT"]
    return {uuid: env.get(f"CUDA_DEVICE_MEMORY_LIMIT_{i}", default) for i, uuid in enumerate(visible)}


def test_each_gpu_gets_its_own_shares_limit_whatever_order_the_requests_come_in(
    node: DraNode,
) -> None:
    # a tenant's requests put a big share of the second GPU first and a small one of the first
    # GPU after it: index 0 is the first GPU in the container, so it must get the small limit
    claim = claim_json(
        "mixed",
        share("gpu-1", 30000, 50, share_id="big-b", request="big"),
        share("gpu-0", 1024, 10, share_id="small-a", request="small"),
    )
    assert _prepare(node, claim)["uid-mixed"].error == ""
    spec = node.spec("uid-mixed")
    assert spec is not None
    assert _gpu_limits(spec, [UUID_A, UUID_B]) == {UUID_A: "1024m", UUID_B: "30000m"}


def test_two_shares_of_one_gpu_never_hand_their_limit_to_the_next_gpu(node: DraNode) -> None:
    claim = claim_json(
        "two-on-a",
        share("gpu-0", 1024, 10, share_id="a1", request="one"),
        share("gpu-0", 20000, 40, share_id="a2", request="two"),
        share("gpu-1", 1024, 10, share_id="b1", request="three"),
    )
    assert _prepare(node, claim)["uid-two-on-a"].error == ""
    spec = node.spec("uid-two-on-a")
    assert spec is not None
    limits = _gpu_limits(spec, [UUID_A, UUID_B])
    assert limits[UUID_B] == "1024m"  # not the second share of the first GPU
    assert limits[UUID_A] in ("1024m", "20000m")  # one of its own shares, never more


def test_a_claim_deleted_while_its_pod_runs_keeps_counting_until_the_pod_ends(
    node: DraNode,
) -> None:
    # a tenant may delete its ResourceClaim (after taking its finalizer off) or make another
    # under the same name while the pod that uses it still runs on the GPU
    _prepare(node, claim_json("train", share(memory_mib=30000, cores=60),
                              pods=(("trainer", "pod-uid-1"),)))
    running = Pod("ml", "trainer", "pod-uid-1", node_name=NODE, phase="Running",
                  claims=(PodClaim("gpu", "train"),))
    node.cluster.put_pod(running)
    by_name = Pod("ml", "other", "pod-uid-2", node_name=NODE, phase="Running",
                  claims=(PodClaim("gpu", "shared"),))
    node.cluster.put_pod(by_name)  # joined the claim after it was prepared: named, not recorded
    _prepare(node, claim_json("shared", share("gpu-1", share_id="s2")))
    node.api.delete_claim("ml", "train")
    node.api.put_claim(claim_json("shared", uid="made-again"))

    assert node.container.sweeper().sweep() == []
    assert sorted(node.container.prepared().entries()) == ["uid-shared", "uid-train"]
    assert (node.root / "hook" / "vgpu" / "claims" / "uid-train").is_dir()  # its region stays
    refused = _prepare(node, claim_json("next", share(memory_mib=4096, cores=60, share_id="n")))
    assert "would be over capacity" in refused["uid-next"].error

    node.cluster.put_pod(replace(running, phase="Succeeded"))
    node.cluster.delete_pod("ml", "other")
    assert sorted(node.container.sweeper().sweep()) == ["ml/shared", "ml/train"]
    assert node.container.prepared().entries() == {}


def test_a_prepare_racing_another_of_the_same_claim_never_undoes_what_the_first_wrote(
    node: DraNode,
) -> None:
    # two pods that share a claim start at once, and the kubelet asks for it twice in
    # parallel: the second call looks before the first has recorded the claim (the look is
    # made stale here), and its own write fails (a full disk, for a moment)
    claim = claim_json("shared")
    first = _prepare(node, claim)["uid-shared"]
    specs, prepared = node.container.cdi_specs(), node.container.prepared()
    real_get, looks = prepared.get, []

    def stale_once(uid: str) -> object:
        looks.append(uid)
        return None if len(looks) == 1 else real_get(uid)

    def full(claim_uid: str, spec: object) -> str:
        raise HostFileError("cannot write CDI spec: No space left on device")

    prepared.get = stale_once  # type: ignore[method-assign]
    real_write, specs.write = specs.write, full  # type: ignore[method-assign]

    second = node.preparer.prepare([ref(claim)])["uid-shared"]

    specs.write = real_write  # type: ignore[method-assign]
    assert second == first
    assert node.spec("uid-shared") is not None
    assert (node.root / "hook" / "vgpu" / "claims" / "uid-shared").is_dir()


def _claim_dir(node: DraNode, uid: str) -> Path:
    return node.root / "hook" / "vgpu" / "claims" / uid


def test_a_corrupt_record_is_rebuilt_from_the_claims_own_files_and_nothing_stops_counting(
    node: DraNode, tmp_path: Path
) -> None:
    _prepare(node, claim_json("a", share(memory_mib=30000, cores=60)))
    _prepare(node, claim_json("b", share("gpu-1", 4000, 20, share_id="s-b")))
    _prepare(node, claim_json("debug", share(share_id=None, admin_access=True)))
    before = node.container.prepared().entries()
    specs = {uid: node.spec(uid) for uid in before}
    node.container.cdi_specs().remove("uid-b")  # a reboot empties /var/run/cdi, say
    record = tmp_path / "state" / "dra-prepared.json"
    record.write_text('{"version": 1, "node": "gpu-no')  # a damaged disk block

    restarted = make_node(tmp_path)
    restarted.container.preparer().restore()

    assert restarted.container.prepared().entries() == before
    assert {uid: restarted.spec(uid) for uid in before} == specs
    assert _claim_dir(restarted, "uid-a").is_dir() and _claim_dir(restarted, "uid-b").is_dir()
    assert [p.name.startswith("dra-prepared.json.corrupt-") for p in record.parent.iterdir()
            if p != record] == [True]
    refused = _prepare(restarted, claim_json("c", share(memory_mib=4000, cores=60, share_id="c")))
    assert "20000" not in refused["uid-c"].error
    assert "held (claim ml/a (prepared here))" in refused["uid-c"].error
    again = make_node(tmp_path)  # the rebuilt record was saved: the next start reads it
    assert again.container.prepared().entries() == before


def test_a_missing_record_is_rebuilt_from_the_claims_own_files(
    node: DraNode, tmp_path: Path
) -> None:
    _prepare(node, claim_json("a", share(memory_mib=30000, cores=60)))
    before = node.container.prepared().entries()
    (tmp_path / "state" / "dra-prepared.json").unlink()  # a state dir not kept, or a person

    restarted = make_node(tmp_path)
    restarted.container.preparer().restore()

    assert restarted.container.prepared().entries() == before
    assert restarted.spec("uid-a") is not None


def test_a_corrupt_record_that_cannot_be_rebuilt_stops_preparing_and_removes_nothing(
    node: DraNode, tmp_path: Path
) -> None:
    _prepare(node, claim_json("a", share(memory_mib=30000, cores=60)))
    record = tmp_path / "state" / "dra-prepared.json"
    record.write_text("not json")
    (_claim_dir(node, "uid-a") / "claim.json").write_text("also not json")

    restarted = make_node(tmp_path)
    with pytest.raises(HostFileError) as raised:
        restarted.container.preparer().restore()

    message = str(raised.value)
    assert f"prepared-claims record {record} does not read" in message
    assert "claim uid uid-a: claim.json: not JSON" in message
    assert record.read_text() == "not json"  # left where it is, for a person
    assert restarted.spec("uid-a") is not None and _claim_dir(restarted, "uid-a").is_dir()
    outcome = _prepare(restarted, claim_json("b", share("gpu-1", 1000, 10, share_id="b")))
    assert outcome["uid-b"].error.startswith(f"prepared-claims record {record} does not read")
