"""Fixtures shared by the e2e tests.

`k8s_api`: a Kubernetes API emulator (kmock's KubernetesEmulator extended in
`tests/e2e/k8s_emulator.py`) serving real HTTP on a free 127.0.0.1 port, fresh for each test
and stopped afterwards. Use it from any e2e test::

    from tests.e2e.k8s_emulator import node_manifest

    def test_something(k8s_api):
        k8s_api.create("/api/v1/nodes", node_manifest("gpu-1", annotations={...}))
        settings = ConnectionSettings(host=k8s_api.url)     # in-process adapter
        kubeconfig = k8s_api.kubeconfig(tmp_path / "kubeconfig")  # for a `vgpu` subprocess
        ...
        assert k8s_api.get("/api/v1/nodes/gpu-1")["metadata"]["annotations"][...] == ...

See `RunningApiServer` for the helpers (create, get, list, merge_patch, delete, compact,
drop_watches, requests, kubeconfig) and what the emulator adds to kmock.
"""

from collections.abc import Iterator

import pytest

from tests.e2e.k8s_emulator import RunningApiServer


@pytest.fixture()
def k8s_api() -> Iterator[RunningApiServer]:
    with RunningApiServer() as server:
        yield server
