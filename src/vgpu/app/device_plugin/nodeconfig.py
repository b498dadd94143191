"""Per-node overrides from a JSON file shaped like HAMi's device-plugin `config.json`.

```json
{"nodeconfig": [{"name": "node1", "devicesplitcount": 4, "devicememoryscaling": 1.5,
                 "devicecorescaling": 1, "libcudaloglevel": 3,
                 "enablegetpreferredallocation": true,
                 "filterdevices": {"uuid": ["GPU-..."], "index": [3]}}]}
```

The entry named after this node wins over an entry named `*`, which wins over the plugin's own
settings. A 0 or absent number means "not set" (as in HAMi). Devices listed under
`filterdevices` are neither advertised to the kubelet nor registered on the node. Keys this
plugin does not use (`operatingmode`, `migstrategy`, ...) are accepted and ignored.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vgpu.app.device_plugin.config import DevicePluginConfig
from vgpu.app.errors import ConfigError, one_line_problems
from vgpu.app.settings import read_yaml_mapping
from vgpu.domain.inventory import GpuInfo, SharingConfig

log = logging.getLogger(__name__)

FALLBACK_NAME = "*"


class _FilterDevices(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    uuid: list[str] = []
    index: list[int] = []


class _NodeEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    devicesplitcount: int | None = Field(None, ge=0, le=1000)
    devicememoryscaling: float | None = Field(None, ge=0, le=1000)
    devicecorescaling: float | None = Field(None, ge=0, le=1000)
    libcudaloglevel: int | None = Field(None, ge=0, le=9)
    enablegetpreferredallocation: bool | None = None
    filterdevices: _FilterDevices | None = None


class _NodeConfigFile(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    nodeconfig: list[_NodeEntry] = []


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """The settings in force on this node after per-node overrides."""

    sharing: SharingConfig
    preferred_allocation: bool
    cuda_log_level: str
    excluded_uuids: frozenset[str] = frozenset()
    excluded_indexes: frozenset[int] = frozenset()

    def keeps(self, gpu: GpuInfo) -> bool:
        """False for a GPU the node config filters out."""
        return gpu.uuid not in self.excluded_uuids and gpu.index not in self.excluded_indexes


def node_settings(config: DevicePluginConfig) -> NodeSettings:
    """The plugin's settings with the node config file's entries for this node applied."""
    split = config.split_count
    memory = config.memory_scaling
    cores = config.core_scaling
    preferred = config.preferred_allocation
    log_level = config.cuda_log_level
    uuids: set[str] = set()
    indexes: set[int] = set()
    path = config.node_config_file
    for entry in _entries_for(path, config.node_name) if path is not None else []:
        split = entry.devicesplitcount or split
        memory = entry.devicememoryscaling or memory
        cores = entry.devicecorescaling or cores
        if entry.enablegetpreferredallocation is not None:
            preferred = entry.enablegetpreferredallocation
        if entry.libcudaloglevel is not None:
            log_level = str(entry.libcudaloglevel)
        if entry.filterdevices is not None:
            uuids.update(entry.filterdevices.uuid)
            indexes.update(entry.filterdevices.index)
        log.info("node config %s: applied the entry named %r", path, entry.name)
    return NodeSettings(
        sharing=SharingConfig(split_count=split, memory_scaling=memory, core_scaling=cores),
        preferred_allocation=preferred,
        cuda_log_level=log_level,
        excluded_uuids=frozenset(uuids),
        excluded_indexes=frozenset(indexes),
    )


def _entries_for(path: Path, node: str) -> list[_NodeEntry]:
    what = "node config file"
    try:
        parsed = _NodeConfigFile.model_validate(read_yaml_mapping(path, what))
    except ValidationError as exc:
        raise ConfigError(f"{what} {path}: {one_line_problems(exc)}") from None
    fallback = [e for e in parsed.nodeconfig if e.name == FALLBACK_NAME]
    named = [e for e in parsed.nodeconfig if e.name == node]
    if not fallback and not named:
        log.info("node config %s has no entry for node %s; using the plugin's settings", path, node)
    return fallback + named
