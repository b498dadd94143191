import pytest

from tests.unit.domain.builders import A40_UUIDS, a40_cards, card
from vgpu.domain import (
    CodecError,
    DeviceGrant,
    decode_node_devices,
    decode_pod_grants,
    encode_node_devices,
    encode_pod_grants,
)

# HAMi's own strings (docs/protocol.md#register-annotation, #pod-grant-annotations)
HAMI_JSON = (
    '[{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},'
    '{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","index":1,"count":10,"devmem":32768,'
    '"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]'
)
HAMI_CSV7 = (
    "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
    "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
)
HAMI_CSV9 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true,1,hami-core:"


def test_hami_json_register_annotation_round_trips_byte_for_byte() -> None:
    devices = decode_node_devices(HAMI_JSON)
    assert [d.index for d in devices] == [0, 1]
    assert devices[1].numa == 1 and devices[0].healthy and devices[0].memory == 32768
    assert encode_node_devices(devices) == HAMI_JSON


def test_missing_json_keys_read_as_go_zero_values() -> None:
    (device,) = decode_node_devices('[{"id":"GPU-x","count":4,"devmem":100}]')
    assert (device.index, device.cores, device.numa, device.healthy) == (0, 0, 0, False)
    assert device.mode == ""  # Go's zero value, as HAMi reads it: suits any pod


# HAMi's sample strings with the mode left out (written by plugins that predate `mode`, or by
# hand): they must decode as mode "" and come back unchanged.
MODELESS = [
    '[{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","health":true}]',
    '[{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","index":1,"count":10,"devmem":32768,'
    '"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"health":true},'
    '{"id":"GPU-a","index":2,"count":7,"devmem":40960,"devcore":100,"type":"NVIDIA A100-SXM4-40GB",'
    '"mode":"mig","health":true}]',
]


@pytest.mark.parametrize("text", MODELESS)
def test_a_register_entry_without_mode_round_trips_byte_for_byte(text: str) -> None:
    devices = decode_node_devices(text)
    assert devices[0].mode == ""
    assert encode_node_devices(devices) == text


def test_a_nine_field_csv_entry_with_an_empty_mode_keeps_it_empty() -> None:
    (device,) = decode_node_devices("GPU-a,10,32768,100,NVIDIA-T4,0,true,3,:")
    assert (device.index, device.mode) == (3, "")


def test_legacy_csv_forms_are_read() -> None:
    seven = decode_node_devices(HAMI_CSV7)
    assert len(seven) == 2 and seven[0].index == 0 and seven[0].mode == "hami-core"
    (nine,) = decode_node_devices(HAMI_CSV9)
    assert nine.index == 1 and nine.type == "NVIDIA-Tesla V100-PCIE-32GB" and nine.healthy


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[{", "invalid JSON"),
        ('{"id":"x"}', "JSON array"),
        ('[{"count":1}]', "device #0: missing the card id"),
        ('[{"id":"GPU-a","devmem":"lots"}]', "device #0 (GPU-a): devmem='lots'"),
        ('[{"id":"GPU-a","health":"yes"}]', "health='yes'"),
        ('[{"id":"GPU-a","count":-2}]', "count=-2"),
        ("GPU-a,10,100", "neither JSON nor CSV"),
        ("GPU-a,10:", "expected 7 or 9 fields, got 2"),
        ("GPU-a,ten,100,100,T,0,true:", "count='ten'"),
        ("GPU-a,10,100,100,T,0,maybe:", "health='maybe'"),
    ],
)
def test_malformed_register_annotation_says_what_and_where(text: str, words: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_node_devices(text)
    assert words in str(caught.value)
    assert "hami.io/node-nvidia-register" in str(caught.value)


def test_seed_grant_annotation() -> None:
    grants = ((DeviceGrant(A40_UUIDS[0], "NVIDIA", 20000, 80),),)
    assert encode_pod_grants(grants) == f"{A40_UUIDS[0]},NVIDIA,20000,80:;"


@pytest.mark.parametrize(
    "text",
    [
        "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,0:;GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,5000,0:;",
        ";GPU-aaa,NVIDIA,4000,30:GPU-bbb,NVIDIA,4000,30:;",
        ";;",
    ],
)
def test_hami_grant_strings_round_trip_with_empty_segments_kept(text: str) -> None:
    grants = decode_pod_grants(text)
    assert len(grants) == text.count(";")
    assert encode_pod_grants(grants) == text


def test_grant_decoding_keeps_container_positions() -> None:
    init_none, app = decode_pod_grants(";GPU-aaa,NVIDIA,4000,30:GPU-bbb,NVIDIA,4000,30:;")
    assert init_none == ()
    assert [g.uuid for g in app] == ["GPU-aaa", "GPU-bbb"]
    assert app[0] == DeviceGrant("GPU-aaa", "NVIDIA", 4000, 30)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("GPU-a,NVIDIA,100:;", "container #0, card #0: expected UUID,VENDOR,MEM,CORES"),
        (";GPU-a,NVIDIA,lots,0:;", "container #1, card #0: memory='lots'"),
        ("GPU-a,NVIDIA,100,-1:;", "cores='-1' is out of range"),
        ("garbage;", "expected UUID,VENDOR,MEM,CORES, got 'garbage'"),
        (",NVIDIA,1,1:;", "empty card id"),
    ],
)
def test_malformed_grants_are_errors_not_silently_dropped(text: str, words: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_pod_grants(text)
    assert words in str(caught.value)


def test_a_hostile_card_id_is_shown_cut_short_in_the_error() -> None:
    huge = "GPU-" + "a" * 100_000
    with pytest.raises(CodecError) as caught:
        decode_pod_grants(f"{huge},NVIDIA,1,0:{huge},NVIDIA,1,0:;")  # the card listed twice
    message = str(caught.value)
    assert "is already listed" in message and "characters)" in message
    assert len(message) < 500


def test_node_devices_encode_with_zero_values_omitted() -> None:
    text = encode_node_devices([card("GPU-z", 0, healthy=False, numa=0)])
    assert (
        text
        == '[{"id":"GPU-z","count":10,"devmem":46068,"devcore":100,"type":"NVIDIA A40","mode":"hami-core"}]'
    )
    assert decode_node_devices(text)[0].healthy is False
    assert len(decode_node_devices(encode_node_devices(a40_cards()))) == 2


# HAMi v2.10 in MIG mode (docs/protocol.md#mig-register-annotation): every profile key is written, zero or not.
MIG_REGISTER = (
    '[{"id":"GPU-a","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA A100-SXM4-40GB",'
    '"mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,'
    '"placements":[{"start":0,"size":1},{"start":1,"size":1}]},{"name":"7g.40gb",'
    '"memoryMB":40192,"core":100,"sliceCount":7,"placements":[{"start":0,"size":8}]}],'
    '"health":true}]'
)


def test_a_mig_mode_register_annotation_round_trips_with_its_profiles() -> None:
    (device,) = decode_node_devices(MIG_REGISTER)
    assert device.mode == "mig"
    assert [(p.name, p.memory_mib, p.core, p.slices) for p in device.mig_profiles] == [
        ("1g.5gb", 4864, 15, 1),
        ("7g.40gb", 40192, 100, 7),
    ]
    assert [(p.start, p.size) for p in device.mig_profiles[0].placements] == [(0, 1), (1, 1)]
    assert encode_node_devices([device]) == MIG_REGISTER


@pytest.mark.parametrize(
    ("profiles", "words"),
    [
        ('"x"', "migProfiles='x' is not a list"),
        ("[1]", "migProfiles #0: expected an object"),
        ('[{"memoryMB":1}]', "migProfiles #0: name='' is not a profile name"),
        ('[{"name":"1g","memoryMB":-1}]', "memoryMB=-1 is not a valid number"),
        ('[{"name":"1g","placements":[{"start":0,"size":0}]}]', "placement at 0 has size 0"),
        ('[{"name":"1g","placements":{"start":0}}]', "is not a list"),
    ],
)
def test_bad_mig_profiles_are_refused_with_the_place(profiles: str, words: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_node_devices(f'[{{"id":"GPU-a","mode":"mig","migProfiles":{profiles}}}]')
    assert "device #0 (GPU-a)" in str(caught.value) and words in str(caught.value)
