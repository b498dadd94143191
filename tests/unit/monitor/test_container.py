"""The monitor's composition root in fake-cluster mode: the node's pods come from the file."""

from pathlib import Path

from vgpu.app.monitor.config import load_config
from vgpu.app.monitor.container import MonitorContainer

CLUSTER = """\
nodes:
  - name: node1
pods:
  - metadata: {name: here, namespace: ml}
    spec: {nodeName: node1, containers: [{name: main}]}
  - metadata: {name: elsewhere, namespace: ml}
    spec: {nodeName: node2, containers: [{name: main}]}
"""


def test_with_a_fake_cluster_the_pods_on_this_node_are_the_files(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    config = load_config(overrides={"node_name": "node1", "fake_cluster": path})

    pods = MonitorContainer(config=config).pods()()

    assert [(p.namespace, p.name) for p in pods] == [("ml", "here")]
    assert pods[0].uid  # made up as the API server would, so cache directories can match it


def test_a_node_the_file_does_not_list_is_added_empty(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    config = load_config(overrides={"node_name": "node3", "fake_cluster": path})
    container = MonitorContainer(config=config)

    assert container.pods()() == []
    node = container.cluster().get_node("node3")
    assert node is not None and dict(node.annotations) == {}
