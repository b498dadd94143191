"""Fixtures for the NVML adapter tests; the helpers live in tests.unit.nvml.driver."""

from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from tests.unit.nvml.driver import Driver, install


@pytest.fixture
def driver(mocker: MockerFixture) -> Driver:
    return install(mocker)


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """An empty sysfs root; `numa(sysfs, bus, value)` adds a device's numa_node file."""
    return tmp_path / "sys"
