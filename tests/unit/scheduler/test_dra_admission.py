"""The webhook's DRA mode as a use case: templates made by get-or-create before the pod is
admitted, a denial naming why when they cannot be, the cluster's cards read only when needed."""

from typing import Any

import pytest

from tests.unit.domain.builders import container, manifest
from vgpu.adapters.fake.dra import FakeDraApi
from vgpu.app.scheduler.dra_admission import ClusterCards, DraAdmission
from vgpu.domain import AdmissionConfig, AdmissionDecision
from vgpu.domain.dra import (
    DraAdmissionConfig,
    GpuCard,
    gpu_device,
    node_slice,
    resource_slice_json,
)
from vgpu.ports.cluster import ClusterError, Conflict, Rejected

CONFIG = DraAdmissionConfig(AdmissionConfig())
SLICE = resource_slice_json(
    node_slice("node-a", [gpu_device(GpuCard("GPU-a", 0, "NVIDIA A100-SXM4-80GB", 81920))])
)


class Templates(FakeDraApi):
    """Templates in memory, with a create that fails as told, and counts of the calls."""

    def __init__(self, slices: list[dict[str, Any]] | None = None) -> None:
        super().__init__(slices=slices or [SLICE])
        self.fail_create: ClusterError | None = None
        self.create_lands = False  # the create happens although it fails (a lost answer)
        self.fail_list: ClusterError | None = None
        self.calls: list[str] = []

    def get_claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append("get")
        return super().get_claim_template(namespace, name)

    def create_claim_template(self, manifest: Any) -> dict[str, Any]:
        self.calls.append("create")
        if self.fail_create is None:
            return super().create_claim_template(manifest)
        if self.create_lands:
            super().create_claim_template(manifest)
        raise self.fail_create

    def list_resource_slices(self) -> list[dict[str, Any]]:
        self.calls.append("list")
        if self.fail_list is not None:
            raise self.fail_list
        return super().list_resource_slices()


def admission(port: Templates, clock: list[float] | None = None) -> DraAdmission:
    now = clock or [0.0]
    cards = ClusterCards(port, "gpu.vgpu.io", 30.0, clock=lambda: now[0])
    return DraAdmission(CONFIG, cards, port)


def admit(port: Templates, pod: dict[str, Any], dry_run: bool = False) -> AdmissionDecision:
    return admission(port).admit(pod, "ml", dry_run=dry_run)


POD = manifest(container(gpu=1, mem=20000))


def test_the_template_is_made_once_and_found_by_the_next_pod() -> None:
    port = Templates()

    first = admit(port, POD)
    second = admit(port, manifest(container(gpu=1, mem=20000), name="other"))

    assert first.allowed and second.allowed
    assert port.calls == ["get", "create", "get"]
    (stored,) = port.templates
    assert stored["metadata"]["namespace"] == "ml"
    assert stored["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "vgpu"}


def test_a_template_of_that_name_asking_for_something_else_denies_the_pod() -> None:
    port = Templates()
    admit(port, POD)
    port.templates[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 8

    decision = admit(port, POD)

    assert not decision.allowed
    assert "exists and asks for something other than 1 GPU, each 20000 MiB" in decision.message
    assert "delete it and create the pod again" in decision.message


def test_a_create_that_lost_a_race_uses_the_template_the_other_made() -> None:
    port = Templates()
    port.fail_create, port.create_lands = Conflict("already exists"), True

    assert admit(port, POD).allowed
    assert port.calls == ["get", "create", "get"]


def test_a_create_whose_answer_was_lost_is_read_back() -> None:
    port = Templates()
    port.fail_create, port.create_lands = ClusterError("timed out"), True

    assert admit(port, POD).allowed


@pytest.mark.parametrize(
    ("failure", "lands", "message"),
    [
        (Rejected("HTTP 403 Forbidden"), False, "403 Forbidden"),
        (ClusterError("timed out"), False, "timed out"),
    ],
)
def test_a_template_that_cannot_be_made_denies_the_pod_naming_it(
    failure: ClusterError, lands: bool, message: str
) -> None:
    port = Templates()
    port.fail_create, port.create_lands = failure, lands

    decision = admit(port, POD)

    assert not decision.allowed
    assert decision.message.startswith("cannot make ResourceClaimTemplate ml/vgpu-")
    assert message in decision.message


def test_a_dry_run_makes_nothing_and_answers_the_same_patch() -> None:
    port = Templates()

    dry = admit(port, POD, dry_run=True)

    assert dry.allowed and port.templates == [] and "create" not in port.calls
    assert dry.patch == admit(Templates(), POD).patch


def test_the_cards_are_listed_only_for_a_percentage_and_again_after_the_refresh() -> None:
    port = Templates()
    clock = [0.0]
    webhook = admission(port, clock)
    percentage = manifest(container(gpu=1, pct=50))

    webhook.admit(POD, "ml")
    assert "list" not in port.calls
    webhook.admit(percentage, "ml")
    webhook.admit(percentage, "ml")
    clock[0] = 31.0
    webhook.admit(percentage, "ml")

    assert port.calls.count("list") == 2
    (template,) = port.templates[1:]
    request = template["spec"]["spec"]["devices"]["requests"][0]
    assert request["firstAvailable"][0]["capacity"]["requests"]["memory"] == "40Gi"


def test_cards_that_cannot_be_listed_deny_only_the_pods_that_need_them() -> None:
    port = Templates()
    port.fail_list = ClusterError("HTTP 500")

    assert admit(port, POD).allowed
    decision = admit(port, manifest(container(gpu=1, pct=50)))
    assert not decision.allowed
    assert "cannot read the cluster's GPUs (ResourceSlices of gpu.vgpu.io)" in decision.message


def test_a_slice_that_does_not_read_is_left_out_and_the_others_count() -> None:
    bad = {"metadata": {"name": "x"}, "spec": {"driver": "gpu.vgpu.io", "pool": "garbage"}}
    other = {"metadata": {"name": "y"}, "spec": {"driver": "nic.example.com"}}
    port = Templates([bad, other, SLICE])

    cards = ClusterCards(port, "gpu.vgpu.io", 30.0).cards()

    assert [(c.uuid, c.type, c.memory) for c in cards] == [
        ("GPU-a", "NVIDIA A100-SXM4-80GB", 81920)
    ]
