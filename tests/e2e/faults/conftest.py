"""`faults`: a FaultCluster on a fresh API emulator; every replica and proxy is stopped after."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.faults.cluster import FaultCluster
from tests.e2e.k8s_emulator import RunningApiServer


@pytest.fixture()
def faults(k8s_api: RunningApiServer, tmp_path: Path) -> Iterator[FaultCluster]:
    cluster = FaultCluster(k8s_api, tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()
