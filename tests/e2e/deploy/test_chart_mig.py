"""charts/vgpu hands the device plugin HAMi's `migProfileAllowlist` (docs/protocol.md#mig-profile-allowlist), in a
settings file the plugin loads."""

from pathlib import Path

from tests.e2e.deploy.render import one, template
from vgpu.app.device_plugin.config import DevicePluginConfig, load_config


def plugin_settings(tmp_path: Path, allowlist: str | None = None) -> DevicePluginConfig:
    """The plugin's settings as rendered, with `allowlist` (YAML) as the value if given."""
    values = []
    if allowlist is not None:
        values.append(tmp_path / "values.yaml")
        values[0].write_text(f"devices:\n  nvidia:\n    migProfileAllowlist: {allowlist}\n")
    objects = template(*values)
    path = tmp_path / "plugin.yaml"
    path.write_text(one(objects, "ConfigMap", "vgpu-device-plugin")["data"]["config.yaml"])
    return load_config(path, env={"NODE_NAME": "gpu-1"})


def test_hami_defaults_reach_the_plugin(tmp_path: Path) -> None:
    allowlist = plugin_settings(tmp_path).mig_allowlist
    assert allowlist is not None
    assert len(allowlist) == 9
    a100 = next(e for e in allowlist if "A100-SXM4-40GB" in e.models)
    assert a100.profiles == ("1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb")
    assert allowlist[-1].models == ("RTX PRO 6000 Blackwell Server Edition",)


def test_an_empty_allowlist_stays_empty_and_null_publishes_every_profile(tmp_path: Path) -> None:
    empty = plugin_settings(tmp_path, "[]")
    assert empty.mig_allowlist == ()
    unset = plugin_settings(tmp_path, "null")
    assert unset.mig_allowlist is None
