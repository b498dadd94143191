from pathlib import Path

import pytest

from vgpu.app.device_plugin.config import ConfigError, load_config


def test_defaults_follow_hami_with_the_node_from_node_name() -> None:
    config = load_config(env={"NODE_NAME": "gpu-node-1"})

    assert config.node_name == "gpu-node-1"
    assert (config.resource_name, config.split_count) == ("nvidia.com/gpu", 10)
    assert (config.memory_scaling, config.core_scaling) == (1.0, 1.0)
    assert config.plugin_dir == Path("/var/lib/kubelet/device-plugins")
    assert config.socket_name == "nvidia-gpu.sock"


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text("node_name: from-file\nsplit_count: 4\nmemory_scaling: 2\nhook_path: /opt\n")

    config = load_config(
        path,
        env={"VGPU_SPLIT_COUNT": "6", "VGPU_DISABLE_CONTROL_NAMESPACES": "ops, research"},
        overrides={"split_count": 8, "hook_path": None},
    )

    assert config.node_name == "from-file"
    assert config.split_count == 8
    assert config.memory_scaling == 2.0
    assert config.hook_path == "/opt"
    assert config.disable_control_namespaces == ("ops", "research")


def test_vgpu_node_name_wins_over_node_name() -> None:
    config = load_config(env={"NODE_NAME": "a", "VGPU_NODE_NAME": "b"})
    assert config.node_name == "b"


def test_a_bad_value_names_the_field_the_value_and_where_it_came_from() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(env={"NODE_NAME": "n", "VGPU_SPLIT_COUNT": "0"})
    message = str(err.value)
    assert "split_count" in message and "'0'" in message and "VGPU_SPLIT_COUNT" in message


def test_the_node_name_is_required() -> None:
    with pytest.raises(ConfigError, match=r"node_name is required.*--node-name.*NODE_NAME"):
        load_config(env={})


def test_a_resource_name_must_be_an_extended_resource() -> None:
    with pytest.raises(ConfigError, match=r"resource_name.*extended resource"):
        load_config(overrides={"node_name": "n", "resource_name": "gpu"})


def test_an_unknown_key_in_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text("node_name: n\nsplitcount: 3\n")
    with pytest.raises(ConfigError, match=f"splitcount.*Extra inputs.*{path}"):
        load_config(path)


def test_an_unreadable_or_malformed_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read .*missing\.yaml"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: must be a YAML mapping, not list"):
        load_config(bad)


def test_the_socket_name_follows_the_resource_or_the_endpoint_setting() -> None:
    assert load_config(
        overrides={"node_name": "n", "resource_name": "example.com/vgpu"}
    ).socket_name == ("example-vgpu.sock")
    assert (
        load_config(overrides={"node_name": "n", "endpoint": "mine.sock"}).socket_name
        == "mine.sock"
    )
    with pytest.raises(ConfigError, match="endpoint"):
        load_config(overrides={"node_name": "n", "endpoint": "../escape.sock"})


def test_signing_is_on_by_default_with_the_key_secret_in_vgpu_system() -> None:
    signing = load_config(env={"NODE_NAME": "n"}).signing

    assert signing.enabled
    assert (signing.secret_namespace, signing.secret_name) == ("vgpu-system", "vgpu-grant-keys")
    assert signing.refresh_interval == 30.0
    assert signing.trusted_schedulers == ("hami-scheduler", "vgpu-scheduler")


def test_signing_settings_come_from_the_file_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text("node_name: n\nsigning:\n  secret_namespace: gpu-ops\n  enabled: false\n")

    signing = load_config(path, env={"VGPU_SIGNING__TRUSTED_SCHEDULERS": "hami-scheduler"}).signing

    assert not signing.enabled
    assert signing.secret_namespace == "gpu-ops"
    assert signing.trusted_schedulers == ("hami-scheduler",)


def test_signing_off_must_trust_some_scheduler() -> None:
    with pytest.raises(ConfigError, match="trusted_schedulers must name at least one"):
        load_config(
            env={"NODE_NAME": "n", "VGPU_SIGNING__ENABLED": "false"},
            overrides={"signing": {"enabled": False, "trusted_schedulers": []}},
        )


def test_hamis_hook_path_variable_sets_the_hook_path_below_vgpus_own() -> None:
    assert load_config(env={"NODE_NAME": "n"}).hook_path == "/usr/local"
    assert load_config(env={"NODE_NAME": "n", "HOOK_PATH": "/opt/hami"}).hook_path == "/opt/hami"
    both = {"NODE_NAME": "n", "HOOK_PATH": "/opt/hami", "VGPU_HOOK_PATH": "/srv"}
    assert load_config(env=both).hook_path == "/srv"


def test_hamis_topology_score_switch_is_read() -> None:
    assert load_config(env={"NODE_NAME": "n"}).topology_score is False
    on = load_config(env={"NODE_NAME": "n", "ENABLE_TOPOLOGY_SCORE": "true"})
    assert on.topology_score is True
    with pytest.raises(ConfigError, match=r"topology_score.*ENABLE_TOPOLOGY_SCORE"):
        load_config(env={"NODE_NAME": "n", "ENABLE_TOPOLOGY_SCORE": "perhaps"})


def test_the_health_endpoint_listens_on_9397_by_default_and_can_be_moved_or_turned_off() -> None:
    assert load_config(env={"NODE_NAME": "n"}).health_listen == ":9397"
    moved = load_config(env={"NODE_NAME": "n", "VGPU_HEALTH_LISTEN": "127.0.0.1:9500"})
    assert moved.health_listen == "127.0.0.1:9500"
    assert load_config(env={"NODE_NAME": "n"}, overrides={"health_listen": ""}).health_listen == ""


@pytest.mark.parametrize("value", ["9397", ":99999", "health", "::1]:9397"])
def test_a_bad_health_address_names_the_field_and_value(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(env={"NODE_NAME": "n"}, overrides={"health_listen": value})
    assert "field health_listen" in str(refused.value)
    assert repr(value) in str(refused.value)


def test_the_driver_is_waited_for_300_s_by_default_and_0_means_not_at_all() -> None:
    assert load_config(env={"NODE_NAME": "n"}).driver_wait == 300
    assert load_config(env={"NODE_NAME": "n", "VGPU_DRIVER_WAIT": "0"}).driver_wait == 0
    with pytest.raises(ConfigError, match="field driver_wait"):
        load_config(env={"NODE_NAME": "n"}, overrides={"driver_wait": -1})
