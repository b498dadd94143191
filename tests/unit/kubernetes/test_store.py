"""The informer cache: which events a relist or a watch event amounts to."""

from vgpu.adapters.kubernetes.store import Store, is_newer
from vgpu.domain.node import ClusterNode
from vgpu.ports.cluster import Action


def _node(name: str, version: str, **annotations: str) -> ClusterNode:
    return ClusterNode(name, annotations=annotations, resource_version=version)


def test_a_relist_reports_added_modified_and_deleted_objects() -> None:
    store: Store[ClusterNode] = Store()
    store.replace([_node("same", "1"), _node("changes", "1"), _node("goes", "1")])

    changes = store.replace([_node("same", "1"), _node("changes", "2", a="b"), _node("new", "3")])

    assert sorted((a.value, n.name) for a, n in changes) == [
        ("ADDED", "new"),
        ("DELETED", "goes"),
        ("MODIFIED", "changes"),
    ]
    assert sorted(n.name for n in store.values()) == ["changes", "new", "same"]


def test_a_relist_keeps_the_last_good_version_of_an_object_that_no_longer_reads() -> None:
    store: Store[ClusterNode] = Store()
    store.replace([_node("broken-now", "1")])
    assert store.replace([], unreadable=["broken-now"]) == []
    assert store.get("broken-now") == _node("broken-now", "1")


def test_a_replayed_added_is_no_change_but_a_changed_one_is_modified() -> None:
    store: Store[ClusterNode] = Store()
    assert store.apply(Action.ADDED, _node("n", "1")) is Action.ADDED
    assert store.apply(Action.ADDED, _node("n", "1")) is None
    assert store.apply(Action.ADDED, _node("n", "2")) is Action.MODIFIED
    assert store.apply(Action.MODIFIED, _node("m", "3")) is Action.ADDED
    assert store.apply(Action.DELETED, _node("n", "4")) is Action.DELETED
    assert store.apply(Action.DELETED, _node("n", "4")) is None
    assert [n.name for n in store.values()] == ["m"]


def test_modified_is_reported_even_when_our_own_write_already_cached_it() -> None:
    store: Store[ClusterNode] = Store()
    store.apply(Action.ADDED, _node("n", "1"))
    store.write_through(_node("n", "2", lock="x"))
    assert store.apply(Action.MODIFIED, _node("n", "2", lock="x")) is Action.MODIFIED


def test_a_write_answer_never_replaces_a_newer_version_nor_revives_a_deleted_object() -> None:
    store: Store[ClusterNode] = Store()
    store.apply(Action.ADDED, _node("n", "5", seen="watch"))
    store.write_through(_node("n", "4", seen="write"))
    assert store.get("n") == _node("n", "5", seen="watch")
    store.apply(Action.DELETED, _node("n", "6"))
    store.write_through(_node("n", "7"))
    assert store.get("n") is None


def test_resource_versions_compare_as_numbers_when_both_are() -> None:
    assert is_newer("10", "9") and not is_newer("9", "10") and not is_newer("9", "9")
    assert is_newer("abc", "9") and is_newer("9", "")
