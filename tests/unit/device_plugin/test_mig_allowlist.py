"""The device plugin's `mig_profile_allowlist`: validated at load, and it decides which MIG
profiles each GPU registers (docs/protocol.md#mig-profile-allowlist)."""

import pytest

from vgpu.adapters.fake.gpus import FakeGpus
from vgpu.app.device_plugin.config import ConfigError, load_config
from vgpu.app.device_plugin.discovery import discover
from vgpu.app.device_plugin.nodeconfig import node_settings
from vgpu.domain.inventory import GpuInfo
from vgpu.domain.mig import MigPlacement, MigProfile

A100 = GpuInfo("GPU-a100", 0, "NVIDIA A100-SXM4-40GB", 40960, mig_enabled=True)
H100 = GpuInfo("GPU-h100", 1, "NVIDIA H100 80GB HBM3", 81559, mig_enabled=True)
NVML = (
    MigProfile("1g.5gb", 1, 4864, 15, (MigPlacement(0, 1),), instances=7),
    MigProfile("3g.20gb", 3, 19968, 43, (MigPlacement(0, 4), MigPlacement(4, 4)), instances=2),
)
ALLOW_A100 = [{"models": ["A100-SXM4-40GB"], "profiles": ["3g.20gb", "7g.40gb"]}]


def registered(allowlist: object) -> dict[str, list[str]]:
    config = load_config(overrides={"node_name": "n1", "mig_profile_allowlist": allowlist})
    fake = FakeGpus([A100, H100], mig_profiles={"GPU-a100": NVML, "GPU-h100": NVML})
    state = discover(fake, node_settings(config), False, config.mig_allowlist)
    return {d.uuid: [p.name for p in d.mig_profiles] for d in state.registered_devices()}


def test_only_allowlisted_profiles_are_published_and_unnamed_models_not_registered() -> None:
    assert registered(ALLOW_A100) == {"GPU-a100": ["3g.20gb"]}


def test_without_an_allowlist_every_profile_nvml_offers_is_published() -> None:
    assert registered(None) == {
        "GPU-a100": ["1g.5gb", "3g.20gb"],
        "GPU-h100": ["1g.5gb", "3g.20gb"],
    }


@pytest.mark.parametrize(
    ("allowlist", "problem"),
    [
        ([{"models": [], "profiles": ["1g.5gb"]}], "needs at least one model and one profile"),
        ([{"models": ["A30"], "profiles": ["6gb"]}], "profile '6gb' is not a MIG profile"),
        ([{"models": ["A30"], "profiles": ["1g.6gb"], "extra": 1}], "extra"),
    ],
)
def test_a_bad_allowlist_stops_the_plugin_with_the_entry_and_value(
    allowlist: object, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(overrides={"node_name": "n1", "mig_profile_allowlist": allowlist})
    assert "mig_profile_allowlist" in str(raised.value)
    assert problem in str(raised.value)
