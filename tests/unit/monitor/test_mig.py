"""`hami_mig_device_info`: one series per realized MIG instance of a vGPU pod on the node."""

import json
import logging
from typing import Any

import pytest

from tests.unit.monitor.scrape import key, parse, series
from vgpu.adapters.fake.accounting import FakeAccounting
from vgpu.app.monitor.metrics import MonitorMetrics, MonitorSources
from vgpu.app.monitor.mig import ContainerMigDevice, realized_instances
from vgpu.domain.pod import Container, Pod
from vgpu.ports.gpu import GpuUsage

NODE = "gpu-node-1"
PARENT = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
REALIZED = {
    "containerIndex": 1,
    "deviceIndex": 0,
    "gpuUUID": PARENT,
    "profile": "1g.10gb",
    "placement": {"start": 2, "size": 1},
    "migUUID": "MIG-5c1f0b0a-1111-2222-3333-444455556666",
    "gpuInstanceID": 9,
    "computeInstanceID": 0,
}
PENDING = {
    **{
        k: v
        for k, v in REALIZED.items()
        if k not in ("migUUID", "gpuInstanceID", "computeInstanceID")
    },
    "deviceIndex": 1,
}


def _pod(entries: Any, labels: dict[str, str] | None = None) -> Pod:
    text = entries if isinstance(entries, str) else json.dumps(entries)
    return Pod(
        "team-a",
        "infer",
        uid="uid-1",
        annotations={"hami.io/vgpu-mig-allocations": text},
        labels={"hami.io/vgpu-node": NODE} if labels is None else labels,
        containers=(Container("warmup", is_init=True), Container("server")),
    )


def test_only_realized_entries_count_and_containers_count_init_first() -> None:
    assert realized_instances(_pod([REALIZED, PENDING])) == [
        ContainerMigDevice("server", 0, PARENT, "1g.10gb", REALIZED["migUUID"], 9, 0)
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "invalid JSON"),
        ('{"a": 1}', "not a JSON array"),
        (json.dumps([{**REALIZED, "containerIndex": 5}]), "containerIndex 5 names no container"),
        (json.dumps([{**REALIZED, "gpuInstanceID": "9"}]), "gpuInstanceID='9' is not a number"),
        (json.dumps([{**REALIZED, "gpuInstanceID": None}]), "partial runtime identity"),
    ],
)
def test_a_malformed_annotation_is_logged_and_gives_nothing(
    text: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert realized_instances(_pod(text)) == []

    assert "pod team-a/infer: ignoring annotation hami.io/vgpu-mig-allocations" in caplog.text
    assert problem in caplog.text


class _NoCards:
    def read_usage(self) -> list[GpuUsage]:
        return []


def _scrape(pod: Pod, legacy: bool = False) -> dict[str, Any]:
    sources = MonitorSources(NODE, _NoCards(), FakeAccounting(), lambda: [pod])  # type: ignore[arg-type]
    return parse(MonitorMetrics(sources, legacy).render().decode())


def test_each_realized_instance_is_one_series_with_hamis_labels() -> None:
    found = _scrape(_pod([REALIZED, PENDING]), legacy=True)

    ctr = {
        "namespace": "team-a",
        "pod": "infer",
        "container": "server",
        "vdevice_index": "0",
        "device_uuid": PARENT,
    }
    assert series(found, "hami_mig_device_info") == {
        key(
            **ctr,
            mig_uuid=REALIZED["migUUID"],
            profile="1g.10gb",
            gpu_instance_id="9",
            compute_instance_id="0",
        ): 1
    }
    assert series(found, "MigInfo") == {
        key(
            podnamespace="team-a",
            podname="infer",
            ctrname="server",
            vdeviceid="0",
            deviceuuid=PARENT,
            instanceid="9",
        ): 1
    }


def test_pods_not_labelled_for_this_node_have_no_mig_series() -> None:
    assert series(_scrape(_pod([REALIZED], labels={})), "hami_mig_device_info") == {}
