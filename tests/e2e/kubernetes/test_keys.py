"""The grant key ring in a Secret, over real HTTP against the API emulator."""

import base64
from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient

from tests.e2e.k8s_emulator import RunningApiServer
from vgpu.adapters.kubernetes import ConnectionSettings, SecretGrantKeys, new_api_client
from vgpu.domain.trust import KeyRing, SigningError
from vgpu.ports.cluster import ClusterError

SECRETS = "/api/v1/namespaces/vgpu-system/secrets"
KEY = b"k" * 32


@pytest.fixture()
def client(k8s_api: RunningApiServer) -> Iterator[ApiClient]:
    api_client = new_api_client(ConnectionSettings(host=k8s_api.url))
    yield api_client
    api_client.close()  # type: ignore[no-untyped-call]


def test_no_secret_reads_as_no_ring_and_create_stores_one(
    k8s_api: RunningApiServer, client: ApiClient
) -> None:
    keys = SecretGrantKeys(client, "vgpu-system", "vgpu-grant-keys")
    assert keys.load() is None
    ring = KeyRing({"k20261126t0530": KEY})
    assert keys.create(ring) == ring
    stored = k8s_api.get(f"{SECRETS}/vgpu-grant-keys")
    assert stored is not None
    assert stored["data"] == {"k20261126t0530": base64.b64encode(KEY).decode()}
    assert keys.load() == ring


def test_a_second_replica_creating_the_secret_gets_the_first_ones_ring(
    client: ApiClient,
) -> None:
    first = SecretGrantKeys(client, "vgpu-system", "vgpu-grant-keys")
    second = SecretGrantKeys(client, "vgpu-system", "vgpu-grant-keys")
    winner = first.create(KeyRing({"k1": KEY}))
    assert second.create(KeyRing({"k2": b"z" * 32})) == winner


def test_a_rotation_added_to_the_secret_is_read_back(
    k8s_api: RunningApiServer, client: ApiClient
) -> None:
    keys = SecretGrantKeys(client, "vgpu-system", "vgpu-grant-keys")
    keys.create(KeyRing({"k1": KEY}))
    new = base64.b64encode(b"n" * 32).decode()
    k8s_api.merge_patch(f"{SECRETS}/vgpu-grant-keys", {"data": {"k2": new}})
    ring = keys.load()
    assert ring is not None and ring.active == "k2" and set(ring.keys) == {"k1", "k2"}


def test_a_key_that_is_not_base64_is_an_error_naming_the_secret(
    k8s_api: RunningApiServer, client: ApiClient
) -> None:
    k8s_api.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, "data": {"k1": "!"}},
    )
    with pytest.raises(ClusterError, match="Secret vgpu-system/bad: key 'k1' is not base64"):
        SecretGrantKeys(client, "vgpu-system", "bad").load()


def test_a_key_too_short_to_sign_with_is_refused(
    k8s_api: RunningApiServer, client: ApiClient
) -> None:
    short = base64.b64encode(b"short").decode()
    k8s_api.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "weak"}, "data": {"k1": short}},
    )
    with pytest.raises(SigningError, match="'k1' has 5 bytes; at least 32"):
        SecretGrantKeys(client, "vgpu-system", "weak").load()
