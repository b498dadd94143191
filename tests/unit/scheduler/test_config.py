"""Settings: defaults < YAML file < VGPU_* environment < flags; errors name field and source."""

from pathlib import Path

import pytest

from vgpu.app.scheduler.config import ConfigError, SchedulerConfig, load_config
from vgpu.domain import Policy


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scheduler.yaml"
    path.write_text(text)
    return path


def test_defaults_follow_hami() -> None:
    config = load_config()
    assert config.scheduler_name == "vgpu-scheduler"
    assert config.node_policy is Policy.BINPACK and config.gpu_policy == "spread"
    assert config.vendor().count_resource == "nvidia.com/gpu"
    assert (config.listen_address, config.listen_port) == ("127.0.0.1", 8080)
    assert config.admission().gpu_core_policy == ""


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
scheduler_name: hami-scheduler
listen_port: 9000
resources:
  memory: example.com/vmem
leader_election:
  enabled: true
  namespace: gpu
""",
    )
    env = {
        "VGPU_LISTEN_PORT": "9100",
        "VGPU_LEADER_ELECTION__NAMESPACE": "gpu-system",
        "VGPU_GPU_POLICY": "binpack",
        "HOME": "/root",
    }
    config = load_config(path, env, {"listen_port": 9200, "tls_cert": None})
    assert config.scheduler_name == "hami-scheduler"
    assert config.listen_port == 9200
    assert config.leader_election.enabled and config.leader_election.namespace == "gpu-system"
    assert config.scheduling().policies.gpu is Policy.BINPACK
    assert config.vendor().memory_resource == "example.com/vmem"
    assert config.scheduling().vendor.memory_resource == "example.com/vmem"


@pytest.mark.parametrize(
    ("text", "env", "says"),
    [
        ("listen_port: high", {}, "field listen_port: Input should be a valid integer"),
        ("node_policy: fancy", {}, "field node_policy"),
        ("surprise: 1", {}, "field surprise: Extra inputs are not permitted"),
        ("resources: {count: gpu}", {}, "field resources.count: must be an extended"),
        ("defaults: {cores: 150}", {}, "field defaults.cores"),
        ("tls_cert: /a.crt", {}, "tls_cert and tls_key must be given together"),
        ("", {"VGPU_RESERVATION_TIMEOUT": "-1"}, "[from VGPU_RESERVATION_TIMEOUT]"),
        (
            "",
            {"VGPU_LEADER_ELECTION__RETRY_PERIOD": "30"},
            "field leader_election: needs retry_period < renew_deadline",
        ),
        ("- a list", {}, "must be a YAML mapping, not list"),
        ("key: [unclosed", {}, "scheduler.yaml: not valid YAML"),
    ],
)
def test_errors_name_the_field_value_and_source(
    tmp_path: Path, text: str, env: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), env)
    assert says in str(caught.value)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "listen_port: high")
    with pytest.raises(ConfigError, match=rf"\[from {path}\]"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")


def test_unknown_environment_names_are_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = load_config(None, {"VGPU_LISTEN_PROT": "1", "VGPU_LEADER_ELECTION": "x"})
    assert config == SchedulerConfig()
    assert "VGPU_LISTEN_PROT" in caplog.text and "VGPU_LEADER_ELECTION" in caplog.text


# listeners -------------------------------------------------------------------------------------
def test_listener_defaults_keep_the_extender_on_loopback() -> None:
    config = load_config()
    assert (config.extender.address, config.extender.port) == ("127.0.0.1", 8888)
    assert not config.extender.mutual_tls
    assert (config.metrics.address, config.metrics.port) == ("0.0.0.0", 9395)
    assert (config.explain.address, config.explain.port) == ("127.0.0.1", 9396)
    assert not config.explain.expose


@pytest.mark.parametrize("address", ["0.0.0.0", "10.0.0.7", "::", "scheduler.example"])
@pytest.mark.parametrize(
    ("listener", "remedy"),
    [("extender", "extender.client_ca"), ("explain", "explain.expose: true")],
)
def test_a_plain_listener_off_loopback_is_refused_naming_the_field(
    address: str, listener: str, remedy: str
) -> None:
    variable = f"VGPU_{listener.upper()}__ADDRESS"
    with pytest.raises(ConfigError) as raised:
        load_config(env={variable: address})
    message = str(raised.value)
    assert f"{listener}.address {address!r} is not a loopback address" in message
    assert remedy in message and f"[from {variable}]" in message


def test_explain_is_served_off_loopback_only_when_exposed_on_purpose() -> None:
    exposed = load_config(env={"VGPU_EXPLAIN__ADDRESS": "0.0.0.0", "VGPU_EXPLAIN__EXPOSE": "true"})
    assert (exposed.explain.address, exposed.explain.expose) == ("0.0.0.0", True)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.1.2.3", "::1", "localhost"])
def test_loopback_addresses_may_serve_plain_http(address: str) -> None:
    assert load_config(env={"VGPU_EXTENDER__ADDRESS": address}).extender.address == address


def test_mutual_tls_needs_certificate_key_and_client_ca_together(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"extender\.tls_cert, extender\.tls_key and extender\.client_ca go together",
    ):
        load_config(overrides={"extender.tls_cert": tmp_path / "tls.crt"})
    path = write(
        tmp_path,
        """
extender:
  address: 0.0.0.0
  tls_cert: /tls/tls.crt
  tls_key: /tls/tls.key
  client_ca: /tls/kube-scheduler-ca.crt
""",
    )
    config = load_config(path)
    assert config.extender.mutual_tls and config.extender.client_ca == Path(
        "/tls/kube-scheduler-ca.crt"
    )


def test_a_dotted_flag_override_keeps_the_rest_of_the_block_from_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
extender:
  address: 0.0.0.0
  port: 7000
  tls_cert: /tls/tls.crt
  tls_key: /tls/tls.key
  client_ca: /tls/ca.crt
""",
    )
    config = load_config(path, overrides={"extender.port": "7443"})
    assert config.extender.port == 7443 and config.extender.client_ca == Path("/tls/ca.crt")
    with pytest.raises(ConfigError, match=r"field extender.port.*\[from command line\]"):
        load_config(path, overrides={"extender.port": "nope"})


def test_signing_is_on_by_default_with_the_secret_in_vgpu_system() -> None:
    config = load_config(None, {})
    assert config.signing.enabled
    assert (config.signing.secret_namespace, config.signing.secret_name) == (
        "vgpu-system",
        "vgpu-grant-keys",
    )
    off = load_config(None, {"VGPU_SIGNING__ENABLED": "false"})
    assert not off.signing.enabled


def test_api_calls_time_out_before_the_renew_deadline_when_electing() -> None:
    assert load_config(None, {}).api_timeout() == 30.0
    electing = load_config(
        None, {"VGPU_LEADER_ELECTION__ENABLED": "true", "VGPU_LEADER_ELECTION__RENEW_DEADLINE": "8"}
    )
    assert electing.api_timeout() == 4.0


def test_the_cluster_default_gpu_policy_may_be_topology_aware_with_numa() -> None:
    policies = SchedulerConfig(gpu_policy="topology-aware,numa").scheduling().policies
    assert policies.topology and policies.numa


def test_an_unknown_default_gpu_policy_names_the_field_and_value() -> None:
    with pytest.raises(ConfigError, match=r"gpu_policy.*best-fit"):
        load_config(None, {"VGPU_GPU_POLICY": "best-fit"})
