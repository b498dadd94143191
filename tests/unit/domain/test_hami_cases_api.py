"""HAMi v2.10's own unit cases (Project-HAMi/HAMi 4707fb0) for the pieces an embedding scheduler
asks one by one: card order, policy words, MIG geometry, link scores, node-lock values, the
per-node health memory, encoders and reason tokens."""

from datetime import datetime, timedelta

import pytest

from vgpu.domain import (
    Device,
    DeviceGrant,
    DomainError,
    HamiVersion,
    MigPlacement,
    MigProfile,
    NodeHealthBook,
    NodeMemory,
    ScoredCard,
    can_place_mig_profiles,
    decode_mig_profiles,
    decode_node_devices,
    encode_mig_profiles,
    encode_node_devices_csv,
    encode_vendor_grants,
    legacy_mig_template,
    link_name_score,
    lock_owner,
    mig_placement,
    node_lock_expiry,
    node_lock_value,
    parse_reason,
    policy_contains,
    sorts_before,
)

P4 = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4"

# --- TestDeviceUsageList_Less: (policy, numa-bind, card i, card j, Less(i, j)) ------------------
# a card is (numa, containers using it, index, score)

LESS_CASES = [
    ("binpack", False, (0, 10, 0, 10), (0, 20, 0, 20), True),
    ("binpack", False, (1, 10, 0, 10), (0, 20, 0, 20), True),
    ("binpack", False, (0, 10, 0, 10), (1, 20, 0, 20), True),
    ("binpack", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("binpack", False, (1, 0, 0, 20), (0, 0, 0, 10), False),
    ("spread", False, (0, 10, 0, 10), (0, 20, 0, 20), False),
    ("spread", False, (1, 10, 0, 10), (0, 20, 0, 20), False),
    ("spread", False, (1, 0, 0, 20), (0, 0, 0, 10), True),
    ("spread", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("binpack", True, (1, 0, 0, 5), (0, 0, 0, 99), True),
    ("binpack", True, (0, 0, 0, 10), (0, 0, 0, 20), True),
    ("spread", True, (0, 0, 0, 5), (1, 0, 0, 99), True),
    ("spread", True, (0, 0, 0, 20), (0, 0, 0, 10), True),
    ("mutex", False, (0, 2, 0, 0), (0, 0, 0, 0), True),
    ("mutex", False, (0, 0, 0, 0), (0, 1, 0, 0), False),
    ("mutex", False, (0, 0, 0, 0), (1, 0, 0, 0), True),
    ("numa", False, (0, 0, 0, 99), (1, 0, 0, 5), True),
    ("numa", False, (0, 0, 3, 10), (0, 0, 1, 20), False),
    ("binpack,numa", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("spread,numa", False, (0, 0, 0, 15), (1, 0, 0, 15), True),
    ("numa,spread", False, (1, 0, 0, 5), (0, 0, 0, 99), False),
    ("numa,spread", False, (0, 0, 0, 20), (0, 0, 0, 10), True),
    ("mutex,spread", False, (0, 5, 0, 10), (0, 0, 0, 20), False),
    ("mutex,topology-aware", False, (0, 0, 0, 10), (0, 0, 0, 20), False),
    ("binpack,numa", False, (0, 0, 5, 10), (0, 0, 2, 10), False),
    ("binpack,spread", True, (0, 0, 0, 99), (1, 0, 0, 5), True),
    ("spread,numa", True, (0, 0, 0, 20), (0, 0, 0, 10), True),
]


def scored(numa: int, used: int, index: int, score: float) -> ScoredCard:
    return ScoredCard(Device(f"GPU-{index}", index, "NVIDIA", 10, 1000, numa=numa), score, used)


@pytest.mark.parametrize(("policy", "numa_bind", "i", "j", "less"), LESS_CASES)
def test_card_comparison_under_a_policy_string(
    policy: str,
    numa_bind: bool,
    i: tuple[int, int, int, float],
    j: tuple[int, int, int, float],
    less: bool,
) -> None:
    assert sorts_before(scored(*i), scored(*j), policy, numa_bind) is less


# --- TestPolicyContains ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "name", "named"),
    [
        ("mutex", "mutex", True),
        ("spread", "mutex", False),
        ("", "mutex", False),
        ("mutex,spread", "mutex", True),
        ("spread,numa,mutex", "mutex", True),
        ("binpack,spread", "mutex", False),
        ("mutex, spread, numa", "numa", True),
        ("binpack,spread,numa", "topology-aware", False),
    ],
)
def test_whether_a_policy_names_a_word(policy: str, name: str, named: bool) -> None:
    assert policy_contains(policy, name) is named


# --- TestCanPlaceMigProfilesA100, TestSelectMigPlacementUsesBalancedPacking -------------------


def a100() -> tuple[MigProfile, ...]:
    def profile(name: str, size: int, starts: range) -> MigProfile:
        return MigProfile(name, size, 0, 0, tuple(MigPlacement(s, size) for s in starts))

    return (
        profile("1g.5gb", 1, range(7)),
        profile("2g.10gb", 2, range(0, 6, 2)),
        MigProfile("3g.20gb", 3, 0, 0, (MigPlacement(0, 4), MigPlacement(4, 4))),
    )


@pytest.mark.parametrize(
    ("occupied", "requested", "fits"),
    [
        ((), ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"], True),
        (((4, 4),), ["2g.10gb", "1g.5gb", "1g.5gb"], True),
        (((0, 4), (4, 4)), ["1g.5gb"], False),
        (((0, 2), (2, 2), (4, 2)), ["2g.10gb"], False),
    ],
)
def test_whether_a_set_of_profiles_can_be_placed(
    occupied: tuple[tuple[int, int], ...], requested: list[str], fits: bool
) -> None:
    taken = [MigPlacement(*p) for p in occupied]
    assert can_place_mig_profiles(a100(), taken, requested) is fits


def test_placements_pack_the_large_profiles_apart() -> None:
    occupied: list[MigPlacement] = []
    for name, start in (("3g.20gb", 4), ("2g.10gb", 0), ("1g.5gb", 3), ("1g.5gb", 2)):
        placement = mig_placement(a100(), occupied, name)
        assert placement is not None and placement.start == start, (name, placement)
        occupied.append(placement)


# --- Test_calculateGPUScore, Test_calculateGPUPairScore_asymmetric ------------------------------


def test_pair_scores_from_hamis_link_type_names() -> None:
    assert link_name_score(["SingleNVLINKLink"]) == 100
    assert link_name_score(["TwoNVLINKLinks"]) == 200
    assert link_name_score(["P2PLinkSameCPU", "FourNVLINKLinks"]) == 420
    assert link_name_score(["EighteenNVLINKLinks", "P2PLinkUnknown"]) == 1800
    with pytest.raises(ValueError, match="'NineteenNVLINKLinks'"):
        link_name_score(["NineteenNVLINKLinks"])


# --- TestGeneratePodNamespaceName, GenerateNodeLockKeyByPod, TestSetupNodeLockTimeout ---------


@pytest.mark.parametrize(
    ("separator", "owner"),
    [
        ("-", "test-namespace-test-pod"),
        ("", "test-namespacetest-pod"),
        ("@@@", "test-namespace@@@test-pod"),
    ],
)
def test_the_owner_part_of_a_lock(separator: str, owner: str) -> None:
    assert lock_owner("test-namespace", "test-pod", separator) == owner


def test_a_lock_value_is_rfc3339_with_the_zone_then_the_owner() -> None:
    east = datetime.fromisoformat("2026-07-03T15:35:10.25+08:00")
    assert node_lock_value(east, "hami-ns", "hami") == "2026-07-03T15:35:10+08:00,hami-ns,hami"
    with pytest.raises(DomainError, match="has no zone"):
        node_lock_value(datetime(2026, 7, 3, 15, 35, 10), "hami-ns", "hami")


@pytest.mark.parametrize(
    ("value", "expiry"),
    [("", timedelta(minutes=5)), ("10m", timedelta(minutes=10)), ("1h30m", timedelta(minutes=90))],
)
def test_lock_expiry_from_the_environment(value: str, expiry: timedelta) -> None:
    assert node_lock_expiry({"HAMI_NODELOCK_EXPIRE": value}) == expiry


@pytest.mark.parametrize("value", ["notaduration", "10", "-5m"])
def test_a_lock_expiry_that_is_no_duration_is_an_error(value: str) -> None:
    # HAMi logs it and keeps 5 minutes; vgpu says which value is wrong
    with pytest.raises(DomainError, match=f"HAMI_NODELOCK_EXPIRE='{value}'"):
        node_lock_expiry({"HAMI_NODELOCK_EXPIRE": value})


# --- TestNodeDeleted_* --------------------------------------------------------------------------

NOW = datetime(2026, 8, 21, 6, 20, 39)


def test_a_deleted_node_is_forgotten_and_the_others_kept() -> None:
    book = NodeHealthBook(HamiVersion.V2_10)
    book.check("node-a", None, 4, NOW, register="anno-a")
    book.check("node-b", None, 2, NOW, register="anno-b")
    book.node_deleted("node-a")
    book.node_deleted("node-never-registered")
    assert book.memory("node-a") is None
    assert book.memory("node-b") == NodeMemory(2, "anno-b")


def test_a_node_created_again_under_its_name_starts_clean() -> None:
    book = NodeHealthBook(HamiVersion.V2_10)
    book.check("reused-node", None, 4, NOW, register="old-anno")
    book.node_deleted("reused-node")
    verdict = book.check("reused-node", "Heartbeat_2099-01-01T00:00:00Z", 4, NOW, "new-anno")
    assert (verdict.healthy, verdict.refresh) == (True, True)
    book.node_deleted("reused-node")
    # back before its kubelet counts GPUs: not taken for a node whose GPUs went away
    assert book.check("reused-node", None, 0, NOW, register="new-anno").healthy is True


# --- Test_EncodeNodeDevices, TestEncodeDecodeNodeDevicesRoundtrip --------------------------------


@pytest.mark.parametrize("index", [0, 1])
def test_legacy_csv_encoding_round_trips(index: int) -> None:
    card = Device(P4, index, "NVIDIA-Tesla P4", 10, 7680)
    text = encode_node_devices_csv([card])
    assert text == f"{P4},10,7680,100,NVIDIA-Tesla P4,0,true,{index},hami-core:"
    assert decode_node_devices(text) == [card]


# --- TestEncodeContainerDeviceType, TestMigProfileUsesCompactWireFormat ------------------------


def test_one_vendors_grants_of_a_container() -> None:
    first = DeviceGrant("GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313", "NVIDIA", 1000, 10)
    other = DeviceGrant("GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76", "AMD", 2000, 20)
    third = DeviceGrant("GPU-ebe7c3f7-303d-558d-435e-99a160631fe4", "NVIDIA", 3000, 30)
    assert encode_vendor_grants((), "NVIDIA") == ""
    assert encode_vendor_grants((first, other, third), "NVIDIA") == (
        f"{first.uuid},NVIDIA,1000,10:{third.uuid},NVIDIA,3000,30"
    )


def test_mig_profiles_in_the_compact_wire_format() -> None:
    profile = MigProfile("1g.5gb", 1, 4864, 15, (MigPlacement(6, 1),), instances=7)
    text = encode_mig_profiles([profile])
    assert text == (
        '[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,'
        '"placements":[{"start":6,"size":1}]}]'
    )
    assert decode_mig_profiles(text) == (MigProfile("1g.5gb", 1, 4864, 15, (MigPlacement(6, 1),)),)


# --- TestParseReason, TestExtractMigTemplatesFromUUID ------------------------------------------


def test_reason_tokens_parse_to_counts() -> None:
    text = "3/8 CardInsufficientMemory, 2/8 CardInsufficientCore, 3/8 CardNotHealth"
    assert parse_reason(text) == {
        "CardInsufficientMemory": 3,
        "CardInsufficientCore": 2,
        "CardNotHealth": 3,
    }


def test_reason_items_go_cannot_read_are_skipped_not_a_crash() -> None:
    # past int64, or digits other than ASCII ones, Go's Sscanf fails on the item
    text = f"{'9' * 5000}/8 CardNotHealth, \u0663/8 CardUuidMismatch, 2/8 CardInsufficientCore"
    assert parse_reason(text) == {"CardInsufficientCore": 2}


def test_a_legacy_mig_uuid_names_its_template_and_slot() -> None:
    assert legacy_mig_template("GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[7-9]") == (7, 9)


@pytest.mark.parametrize(
    "uuid",
    [
        "GPU-936619fc-f6a1-74a8-0bc6-ecf6b32693137-9]",
        "GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[7-9",
        "GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[79]",
        "GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[a-9]",
        "GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[7-b]",
        f"GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[{'9' * 5000}-1]",
        "GPU-936619fc-f6a1-74a8-0bc6-ecf6b3269313[\u0667-9]",
    ],
    ids=["no [", "no ]", "no -", "letter", "letter slot", "5000 digits", "arabic digit"],
)
def test_a_uuid_without_a_legacy_template_is_an_error(uuid: str) -> None:
    with pytest.raises(DomainError, match="legacy MIG device id"):
        legacy_mig_template(uuid)
