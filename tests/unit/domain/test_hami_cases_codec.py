"""HAMi v2.10's own unit cases (Project-HAMi/HAMi 4707fb0) for reading its register and grant
annotations, asked through vgpu's public API."""

import pytest

from vgpu.domain import (
    NVIDIA,
    ClusterNode,
    CodecError,
    Device,
    DeviceGrant,
    decode_node_devices,
    decode_pod_grants,
)

P4 = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4"

# --- Test_DecodeNodeDevices, Test_GetNodeDevices -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty (a device plugin with no GPUs registers [])"),
        (",", "neither JSON nor CSV"),
        (",:", "expected 7 or 9 fields, got 2"),
        ("a", "neither JSON nor CSV"),
    ],
    ids=["args is empty", "comma only", "empty fields", "no separator"],
)
def test_register_values_hami_refuses_are_errors(text: str, words: str) -> None:
    with pytest.raises(CodecError, match=r"hami\.io/node-nvidia-register") as caught:
        decode_node_devices(text)
    assert words in str(caught.value)


@pytest.mark.parametrize("text", [":", "::", "[]"])
def test_separators_alone_register_no_cards(text: str) -> None:
    assert decode_node_devices(text) == []


def test_a_node_without_the_annotation_or_with_an_empty_list_has_no_cards() -> None:
    # HAMi's GetNodeDevices answers both with an error; vgpu reads them as no cards, which
    # rejects every GPU pod there as NodeUnregistered, the same outcome
    assert ClusterNode("node-03").devices(NVIDIA) == []
    listed = ClusterNode("node-02", {NVIDIA.register_annotation: "[]"})
    assert listed.devices(NVIDIA) == []


def test_the_old_csv_format_is_read() -> None:
    (card,) = decode_node_devices(f"{P4},10,7680,100,NVIDIA-Tesla P4,0,true:")
    assert card == Device(P4, 0, "NVIDIA-Tesla P4", 10, 7680, 100, 0, True, "hami-core")


# --- Test_onUpdatePod_InitContainerShrink: a grant whose type field is empty --------------------


def test_a_grant_with_an_empty_type_field_is_read() -> None:
    init, app = decode_pod_grants("GPU0,,20000,10:;GPU0,,10000,5:;")
    assert (init, app) == (
        (DeviceGrant("GPU0", "", 20000, 10),),
        (DeviceGrant("GPU0", "", 10000, 5),),
    )
