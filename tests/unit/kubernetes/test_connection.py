"""Client configuration from a URL, a kubeconfig, or in-cluster, without global state."""

import json
from pathlib import Path

import pytest
from kubernetes.client import Configuration

from vgpu.adapters.kubernetes.connection import ConnectionSettings, new_configuration
from vgpu.ports.cluster import ClusterError


def test_an_explicit_host_with_a_token_is_used_as_given() -> None:
    config = new_configuration(
        ConnectionSettings(host="https://10.0.0.1:6443/", token="t0k", verify_ssl=False)
    )
    assert config.host == "https://10.0.0.1:6443"
    assert config.get_api_key_with_prefix("BearerToken") == "Bearer t0k"
    assert config.verify_ssl is False
    assert Configuration.get_default_copy().host != config.host  # nothing leaked to defaults


def test_a_kubeconfig_supplies_server_and_credentials(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "k", "cluster": {"server": "http://127.0.0.1:8001"}}],
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            }
        )
    )
    config = new_configuration(ConnectionSettings(kubeconfig=str(kubeconfig)))
    assert config.host == "http://127.0.0.1:8001"
    assert config.get_api_key_with_prefix("BearerToken") == "Bearer abc"


def test_an_unusable_kubeconfig_is_a_cluster_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    missing = tmp_path / "nope"
    with pytest.raises(ClusterError, match=f"kubeconfig {missing}"):
        new_configuration(ConnectionSettings(kubeconfig=str(missing)))
    with pytest.raises(ClusterError, match="in-cluster service account"):
        new_configuration(ConnectionSettings(in_cluster=True))
