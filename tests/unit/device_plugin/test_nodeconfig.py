import json
from pathlib import Path
from typing import Any

import pytest

from vgpu.app.device_plugin.config import ConfigError, load_config
from vgpu.app.device_plugin.nodeconfig import node_settings
from vgpu.domain.inventory import GpuInfo


def _settings(tmp_path: Path, document: Any, node: str = "node1", **config: Any) -> Any:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    return node_settings(
        load_config(overrides={"node_name": node, "node_config_file": path, **config})
    )


def test_the_entry_named_after_the_node_overrides_the_plugin_settings(tmp_path: Path) -> None:
    document = {
        "nodeconfig": [
            {
                "name": "node1",
                "operatingmode": "hami-core",
                "devicememoryscaling": 3,
                "devicesplitcount": 4,
                "migstrategy": "none",
                "filterdevices": {"uuid": ["GPU-b"], "index": [2]},
            },
            {"name": "node2", "devicesplitcount": 7},
        ]
    }

    settings = _settings(tmp_path, document, split_count=5)

    assert settings.sharing.split_count == 4
    assert settings.sharing.memory_scaling == 3.0
    assert settings.sharing.core_scaling == 1.0
    assert not settings.keeps(GpuInfo("GPU-b", 0, "x", 1))
    assert not settings.keeps(GpuInfo("GPU-c", 2, "x", 1))
    assert settings.keeps(GpuInfo("GPU-a", 1, "x", 1))


def test_the_star_entry_applies_under_the_named_one(tmp_path: Path) -> None:
    document = {
        "nodeconfig": [
            {"name": "node1", "devicecorescaling": 2},
            {
                "name": "*",
                "devicesplitcount": 3,
                "devicecorescaling": 1.5,
                "enablegetpreferredallocation": False,
                "libcudaloglevel": 3,
            },
        ]
    }

    settings = _settings(tmp_path, document)

    assert settings.sharing.split_count == 3
    assert settings.sharing.core_scaling == 2.0
    assert settings.preferred_allocation is False
    assert settings.cuda_log_level == "3"


def test_zero_means_not_set_as_in_hami(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"nodeconfig": [{"name": "node1", "devicesplitcount": 0}]})
    assert settings.sharing.split_count == 10


def test_no_entry_for_this_node_keeps_the_plugin_settings(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"nodeconfig": [{"name": "other", "devicesplitcount": 2}]})
    assert settings.sharing.split_count == 10
    assert settings.keeps(GpuInfo("GPU-a", 0, "x", 1))


def test_a_bad_entry_names_the_file_the_field_and_the_value(tmp_path: Path) -> None:
    document = {"nodeconfig": [{"name": "node1", "devicememoryscaling": "lots"}]}
    with pytest.raises(ConfigError) as err:
        _settings(tmp_path, document)
    assert "config.json" in str(err.value)
    assert "nodeconfig[0].devicememoryscaling" in str(err.value) and "'lots'" in str(err.value)
