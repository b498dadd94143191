"""Building the official client's `ApiClient` from in-cluster config, a kubeconfig, or a URL.

Every call builds a fresh `Configuration`; nothing is stored in the client library's
module-level defaults.
"""

import os
from dataclasses import dataclass

from kubernetes.client import ApiClient, Configuration
from kubernetes.config import ConfigException, load_incluster_config, load_kube_config

from vgpu.ports.cluster import ClusterError


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """Where the API is and how to authenticate.

    `host` (e.g. `https://10.0.0.1:6443`, or a test server's `http://127.0.0.1:PORT`) wins,
    optionally with a bearer `token` and a `ca_file`; else `kubeconfig` (+ `context`); else
    `in_cluster`; with none of them: in-cluster when running in a pod, the default kubeconfig
    (`$KUBECONFIG` or `~/.kube/config`) otherwise.
    """

    host: str | None = None
    token: str | None = None
    ca_file: str | None = None
    verify_ssl: bool = True
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False


def new_api_client(settings: ConnectionSettings) -> ApiClient:
    """An ApiClient for `settings`; ClusterError names what could not be loaded."""
    return ApiClient(new_configuration(settings))


def new_configuration(settings: ConnectionSettings) -> Configuration:
    config = Configuration()
    try:
        if settings.host:
            config.host = settings.host.rstrip("/")
            if settings.token:
                config.api_key = {"BearerToken": settings.token}
                config.api_key_prefix = {"BearerToken": "Bearer"}
            if settings.ca_file:
                config.ssl_ca_cert = settings.ca_file
            config.verify_ssl = settings.verify_ssl
        elif settings.kubeconfig or settings.context:
            load_kube_config(
                config_file=settings.kubeconfig,
                context=settings.context,
                client_configuration=config,
                persist_config=False,
            )  # type: ignore[no-untyped-call]
        elif settings.in_cluster or os.environ.get("KUBERNETES_SERVICE_HOST"):
            load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
        else:
            load_kube_config(  # type: ignore[no-untyped-call]
                client_configuration=config, persist_config=False
            )
    except (ConfigException, OSError, ValueError) as exc:
        raise ClusterError(
            f"cannot configure the Kubernetes client ({_source(settings)}): {exc}"
        ) from exc
    return config


def _source(settings: ConnectionSettings) -> str:
    if settings.host:
        return f"host {settings.host}"
    if settings.kubeconfig or settings.context:
        file, context = settings.kubeconfig or "default", settings.context or "current"
        return f"kubeconfig {file}, context {context}"
    if settings.in_cluster:
        return "in-cluster service account"
    return "in-cluster or default kubeconfig"
