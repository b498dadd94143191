"""The kubelet DRA adapter's messages: what the driver decides, in each API version's words."""

from vgpu.adapters.kubelet_dra.generated import dra_health_v1alpha1_pb2 as health_pb
from vgpu.adapters.kubelet_dra.generated import dra_v1_pb2 as v1_pb
from vgpu.adapters.kubelet_dra.generated import dra_v1beta1_pb2 as v1beta1_pb
from vgpu.adapters.kubelet_dra.servicer import (
    claim_refs,
    health_message,
    prepare_response,
    unprepare_response,
)
from vgpu.ports.dra import ClaimOutcome, ClaimRef, DeviceHealthReport, PreparedDevice

OUTCOMES = {
    "u1": ClaimOutcome(devices=(PreparedDevice(("gpu",), "n1", "gpu-0", ("a=b", "c=d"), "s1"),
                                PreparedDevice(("gpu",), "n1", "gpu-1", ("a=e",)))),
    "u2": ClaimOutcome(error="claim ml/x is not allocated"),
}


def test_v1_answers_carry_the_share_id_where_there_is_one() -> None:
    response = prepare_response(v1_pb, OUTCOMES)
    first, second = response.claims["u1"].devices
    assert (list(first.request_names), first.pool_name, first.device_name) == (["gpu"], "n1", "gpu-0")
    assert list(first.cdi_device_ids) == ["a=b", "c=d"]
    assert (first.HasField("share_id"), first.share_id) == (True, "s1")
    assert not second.HasField("share_id")
    assert (response.claims["u2"].error, list(response.claims["u2"].devices)) == (
        "claim ml/x is not allocated", []
    )


def test_v1beta1_answers_are_the_same_without_share_ids() -> None:
    response = prepare_response(v1beta1_pb, OUTCOMES)
    assert [d.device_name for d in response.claims["u1"].devices] == ["gpu-0", "gpu-1"]
    assert response.claims["u2"].error == "claim ml/x is not allocated"


def test_every_claim_of_an_unprepare_gets_an_entry_even_a_successful_one() -> None:
    response = unprepare_response(v1_pb, {"u1": "", "u2": "cannot remove"})
    assert {uid: answer.error for uid, answer in response.claims.items()} == {
        "u1": "", "u2": "cannot remove"
    }


def test_claims_are_read_with_their_uid_and_health_in_the_kubelets_terms() -> None:
    request = v1_pb.NodePrepareResourcesRequest(claims=[v1_pb.Claim(namespace="ml", name="c", uid="u")])
    assert claim_refs(request) == [ClaimRef("ml", "c", "u")]
    message = health_message([
        DeviceHealthReport("n1", "gpu-0", True, 10),
        DeviceHealthReport("n1", "gpu-1", False, 11, "Xid 79", 30),
        DeviceHealthReport("n1", "gpu-2", None, 12),
    ])
    assert [(d.device.pool_name, d.device.device_name, d.health, d.last_updated_time,
             d.health_check_timeout_seconds, d.message) for d in message.devices] == [
        ("n1", "gpu-0", health_pb.HEALTHY, 10, 0, ""),
        ("n1", "gpu-1", health_pb.UNHEALTHY, 11, 30, "Xid 79"),
        ("n1", "gpu-2", health_pb.UNKNOWN, 12, 0, ""),
    ]
