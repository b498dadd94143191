"""What a pod holds by the kubelet's checkpoint: the Allocate answer it got, else whole cards."""

import pytest

from vgpu.domain.device import MIG_MODE, Device, Usage
from vgpu.domain.trust import DeviceAssignment, holdings_by_pod
from vgpu.domain.trust.kubelet_holdings import replica_card

GPU = "nvidia.com/gpu"
A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
B = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
M = "GPU-11111111-2222-3333-4444-555555555555"
CARDS = {
    A: Device(A, 0, "NVIDIA", count=10, memory=32768),
    B: Device(B, 1, "NVIDIA", count=10, memory=32768),
    M: Device(M, 2, "NVIDIA", count=7, memory=81920, mode=MIG_MODE),
}
WHOLE_A = Usage(10, 32768, 100, (1 << 64) - 1)


def hami_answer(*cards: tuple[str, str], cores: str = "30") -> dict[str, str]:
    """Envs as HAMi's (and vgpu's) device plugin answers a container."""
    envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(uuid for uuid, _ in cards)}
    for i, (_, memory) in enumerate(cards):
        envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = memory
    envs["CUDA_DEVICE_SM_LIMIT"] = cores
    envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = "/usr/local/vgpu/x.cache"
    return envs


def assigned(uid: str, *ids: str, envs: dict[str, str] | None = None, container: str = "main",
             resource: str = GPU) -> DeviceAssignment:  # fmt: skip
    return DeviceAssignment(uid, container, resource, ids, envs)


def test_the_answer_given_is_what_is_held_card_by_card() -> None:
    answer = hami_answer((A, "3000m"), (B, "2g"), cores="25")

    held = holdings_by_pod([assigned("u1", f"{A}-0", f"{B}-7", envs=answer)], GPU, CARDS)

    assert held["u1"].footprint == {A: Usage(1, 3000, 25), B: Usage(1, 2048, 25)}
    assert held["u1"].guessed == ()


def test_the_answer_counts_even_when_the_kubelet_chose_replicas_of_another_card() -> None:
    # HAMi serves the cards of the grant, whatever replica ids the kubelet picked
    held = holdings_by_pod([assigned("u1", f"{B}-2", envs=hami_answer((A, "3000m")))], GPU, CARDS)

    assert held["u1"].footprint == {A: Usage(1, 3000, 30)}


def test_containers_of_one_pod_add_up_and_other_resources_are_left_out() -> None:
    entries = [
        assigned("u1", f"{A}-0", envs=hami_answer((A, "1000m")), container="one"),
        assigned("u1", f"{A}-1", envs=hami_answer((A, "2000m")), container="two"),
        assigned("u1", "0000:3b:00.0", resource="example.com/nic", container="one"),
        assigned("u2", f"{A}-3", envs=hami_answer((A, "4000m")), resource="nvidia.com/other"),
    ]

    held = holdings_by_pod(entries, GPU, CARDS)

    assert held.keys() == {"u1"}
    assert held["u1"].footprint == {A: Usage(2, 3000, 60)}


@pytest.mark.parametrize(
    ("envs", "why"),
    [
        (None, "no Allocate answer kept"),
        ({"CUDA_DEVICE_MEMORY_LIMIT_0": "1000m"}, "names no card in NVIDIA_VISIBLE_DEVICES"),
        (hami_answer(("MIG-9a1b", "0m")), "names MIG-9a1b, not a shared GPU of this node"),
        (hami_answer((M, "10000m")), f"names {M}, not a shared GPU"),
        (hami_answer((A, "lots")), f"limits for {A} do not read"),
        (hami_answer((A, "1000m"), cores="-5"), f"limits for {A} do not read"),
    ],
)
def test_an_answer_that_does_not_read_counts_every_named_card_whole(
    envs: dict[str, str] | None, why: str
) -> None:
    held = holdings_by_pod([assigned("u1", f"{A}-4", envs=envs)], GPU, CARDS)["u1"]

    assert held.footprint == {A: WHOLE_A}
    (guess,) = held.guessed
    assert guess.startswith("container main: ") and why in guess
    assert guess.endswith(f"counted as the whole of {A}")


def test_ids_that_name_no_card_here_count_nothing_but_say_so() -> None:
    held = holdings_by_pod([assigned("u1", "GPU-elsewhere-1")], GPU, CARDS)["u1"]

    assert held.footprint == {}
    assert "device ids name no GPU of this node" in held.guessed[0]


def test_memory_suffixes_and_fallbacks_follow_hami_core() -> None:
    def memory(envs: dict[str, str]) -> int:
        base = {"NVIDIA_VISIBLE_DEVICES": A, "CUDA_DEVICE_SM_LIMIT": "0", **envs}
        return holdings_by_pod([assigned("u", f"{A}-0", envs=base)], GPU, CARDS)["u"].footprint[A].memory

    assert memory({"CUDA_DEVICE_MEMORY_LIMIT_0": "1024k"}) == 1
    assert memory({"CUDA_DEVICE_MEMORY_LIMIT_0": "1048577"}) == 2  # bytes, rounded up
    assert memory({"CUDA_DEVICE_MEMORY_LIMIT_0": "3G"}) == 3072
    assert memory({"CUDA_DEVICE_MEMORY_LIMIT": "500m"}) == 500  # the one for all cards
    assert memory({}) == 32768  # no limit: the whole card's memory


def test_no_sm_limit_means_the_whole_cards_cores() -> None:
    envs = {"NVIDIA_VISIBLE_DEVICES": A, "CUDA_DEVICE_MEMORY_LIMIT_0": "1000m"}

    held = holdings_by_pod([assigned("u", f"{A}-0", envs=envs)], GPU, CARDS)["u"]

    assert held.footprint == {A: Usage(1, 1000, 100)}


def test_replica_ids_name_their_card() -> None:
    assert replica_card(f"{A}-12") == A
    assert replica_card("nvidia0") == "nvidia0"


def test_a_device_id_that_is_a_card_itself_names_that_card() -> None:
    # a uuid whose last group is all digits must not lose it as if it were a replica number
    digits = "GPU-0fc3eda5-e98b-a25b-5b0d-123456789012"
    cards = {digits: Device(digits, 0, "NVIDIA", count=10, memory=1000)}

    held = holdings_by_pod([assigned("u", digits)], GPU, cards)["u"]

    assert held.footprint == {digits: Usage(10, 1000, 100, (1 << 64) - 1)}
