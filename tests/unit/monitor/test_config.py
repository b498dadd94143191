"""`vgpu monitor` settings: HAMi's defaults, precedence, and errors that name the field."""

from pathlib import Path

import pytest

from vgpu.app.cli import main
from vgpu.app.monitor.config import ConfigError, load_config


def test_defaults_follow_hami_with_the_node_from_node_name() -> None:
    config = load_config(env={"NODE_NAME": "gpu-node-1"})

    assert config.node_name == "gpu-node-1"
    assert config.host_dir == Path("/usr/local/vgpu/containers")
    assert (config.listen_host, config.listen_port) == ("0.0.0.0", 9394)
    assert (config.legacy_metrics, config.priority_feedback) == (False, True)
    assert (config.interval, config.cleanup_grace) == (5.0, 300.0)


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("node_name: from-file\nmetrics_listen: ':9000'\nlegacy_metrics: true\n")

    config = load_config(
        path,
        env={"VGPU_METRICS_LISTEN": "127.0.0.1:9100", "VGPU_PRIORITY_FEEDBACK": "false"},
        overrides={"metrics_listen": "[::1]:9200", "legacy_metrics": None},
    )

    assert config.node_name == "from-file"
    assert (config.listen_host, config.listen_port) == ("::1", 9200)
    assert config.legacy_metrics is True
    assert config.priority_feedback is False


@pytest.mark.parametrize("value", ["9394", "host:", ":99999", ":port", "::1]:80"])
def test_a_bad_listen_address_names_the_field_and_value(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env={"NODE_NAME": "n", "VGPU_METRICS_LISTEN": value})

    message = str(caught.value)
    assert "field metrics_listen" in message
    assert repr(value) in message
    assert "[from VGPU_METRICS_LISTEN]" in message


def test_the_node_name_is_required() -> None:
    with pytest.raises(ConfigError, match="node_name is required"):
        load_config(env={})


def test_the_command_reports_bad_settings_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["monitor", "--node-name", "n", "--metrics-listen", "nope"])

    assert code == 2
    assert "vgpu monitor: invalid monitor configuration: field metrics_listen" in (
        capsys.readouterr().err
    )
