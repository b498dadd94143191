"""Trace files: the shipped openb lists, user files with the same columns, and bad rows."""

import gzip
import re
from pathlib import Path

import pytest

from vgpu.app.simulate.trace.files import (
    WORKLOADS,
    TraceError,
    read_nodes,
    read_pods,
    shipped_nodes,
    shipped_pods,
)
from vgpu.domain.fragmentation import MilliNode, MilliPod

PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos
p-2,4000,8192,1,460,,LS
p-1,88000,327680,8,1000,V100M32|G3,LS
p-3,500,1024,0,0,,BE
"""


def test_the_shipped_openb_trace_is_the_papers_cluster_and_pod_lists() -> None:
    nodes = read_nodes(shipped_nodes())
    assert len(nodes) == 1213
    assert sum(len(n.node.free) for n in nodes) == 6212
    assert sum(n.node.cpu for n in nodes) == 107_018_000
    assert nodes[0].node == MilliNode("P100", 64000, 262144, (1000, 1000))
    counts = {w: len(read_pods(shipped_pods(w))) for w in WORKLOADS}
    assert counts == {"default": 8152, "gpushare100": 8152, "gpuspec33": 8152, "multigpu50": 9061}
    constrained = [p for p in read_pods(shipped_pods("gpuspec33")) if p.pod.models]
    assert len(constrained) == 2388
    with pytest.raises(TraceError, match="no shipped trace 'gpushare50'"):
        shipped_pods("gpushare50")


def test_a_user_file_with_the_same_columns_plain_or_gzip(tmp_path: Path) -> None:
    plain = tmp_path / "pods.csv"
    plain.write_text(PODS)
    packed = tmp_path / "pods.csv.gz"
    packed.write_bytes(gzip.compress(PODS.encode()))
    for source in (plain, packed):
        pods = read_pods(source)
        assert [p.name for p in pods] == ["p-2", "p-1", "p-3"]
        assert pods[0].pod == MilliPod(4000, 8192, 1, 460)
        assert pods[1].pod == MilliPod(88000, 327680, 8, 1000, frozenset({"V100M32", "G3"}))
        assert pods[2].pod == MilliPod(500, 1024)


def test_the_gpu_spec_column_is_optional(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,100,1,1000\n")
    assert read_pods(path)[0].pod == MilliPod(1000, 100, 1, 1000)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("x,1000,10,1,abc", "pods.csv line 2: gpu_milli: 'abc' is not a whole number"),
        ("x,1000,10,1,1200", "pods.csv line 2: gpu_milli: 1200 is out of range (0..1000)"),
        ("x,-5,10,1,100", "pods.csv line 2: cpu_milli: -5 is out of range (at least 0)"),
        (
            "x,1000,10,2,500",
            "gpu_milli: 500 with num_gpu 2 (a pod with several GPUs takes them whole",
        ),
        ("x,1000,10,0,300", "gpu_milli: 300 with num_gpu 0"),
        ("x,1000,10,1,0", "gpu_milli: 0 for a GPU pod"),
        (",1000,10,1,100", "pods.csv line 2: name: empty"),
        ("x,1000,10,1,100,A||B", "gpu_spec: 'A||B' has an empty model name"),
    ],
)
def test_a_bad_pod_row_is_named_by_file_line_column_and_value(
    tmp_path: Path, row: str, message: str
) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(f"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n{row}\n")
    with pytest.raises(TraceError, match=re.escape(message)):
        read_pods(path)


def test_every_bad_row_is_listed_up_to_ten(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + "x,1,1,1,z\n" * 12)
    with pytest.raises(TraceError) as caught:
        read_pods(path)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith("pods.csv line 2: gpu_milli") and lines[9].startswith(
        "pods.csv line 11"
    )
    assert lines[10] == "and 2 more"


def test_bad_node_files(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu\nn1,1000,1000,2\n")
    with pytest.raises(TraceError, match=re.escape("nodes.csv: missing column(s): model")):
        read_nodes(path)
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,2,\n")
    with pytest.raises(TraceError, match="line 2: model: a node with GPUs needs its card model"):
        read_nodes(path)
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,2,T4\nn1,1000,1000,2,T4\n")
    with pytest.raises(TraceError, match="sn: node 'n1' is listed twice"):
        read_nodes(path)
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,65,T4\n")
    with pytest.raises(TraceError, match=re.escape("gpu: 65 is out of range (0..64)")):
        read_nodes(path)
    broken = tmp_path / "nodes.csv.gz"
    broken.write_bytes(b"\x1f\x8b broken")
    with pytest.raises(TraceError, match=re.escape("nodes.csv.gz: cannot be read")):
        read_nodes(broken)
    with pytest.raises(TraceError, match="cannot be read"):
        read_nodes(tmp_path / "absent.csv")
