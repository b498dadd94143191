"""Least privilege, checked both ways: every API call the adapters make (recorded on the API
emulator while each component's adapters do all they do) is allowed by the chart's RBAC for
that component's service account, and every rule the chart grants is used by some call."""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.deploy.render import MONITOR, NAMESPACE, one, template
from tests.e2e.k8s_emulator import RunningApiServer, node_manifest, pod_manifest
from vgpu.adapters.kubernetes import ConnectionSettings, KubernetesCluster, LeaderElector
from vgpu.adapters.kubernetes.access_review import KubernetesAccessReview
from vgpu.adapters.kubernetes.connection import new_api_client
from vgpu.adapters.kubernetes.dra import KubernetesDraApi
from vgpu.adapters.kubernetes.keys import SecretGrantKeys
from vgpu.adapters.kubernetes.webhook_tls import KubernetesWebhookTLS
from vgpu.app.monitor.config import MonitorConfig
from vgpu.app.monitor.container import make_cluster
from vgpu.app.scheduler.certs import WebhookCerts, WebhookCertsConfig
from vgpu.app.scheduler.config import SchedulerConfig
from vgpu.app.scheduler.container import build_dra_admission
from vgpu.domain.trust import KeyRing

ADAPTERS = Path(__file__).resolve().parents[3] / "src" / "vgpu" / "adapters" / "kubernetes"
# the modules that send API requests, all exercised below; a new one must be added here
EXERCISED = {
    "access_review.py", "api.py", "cluster.py", "dra.py", "dra_reader.py", "informer.py",
    "keys.py", "leader.py", "nodelock.py", "webhook_tls.py",
}
# secure metrics: the scheduler's and the monitor's listeners review each scrape's token
SECURE_METRICS = ("metrics.secure.enabled=true",)
# DRA mode: the DRA driver, the webhook's DRA mode, the monitor on the DRA nodes
DRA = ("dra.enabled=true",)
# rules granted for calls the processes do not make yet: (component, verb, resource)
PENDING: set[tuple[str, str, str]] = set()
# roles bound for the kube-scheduler container (stock roles, and its own Lease)
KUBE_SCHEDULER_ROLES = {
    "system:kube-scheduler", "system:volume-scheduler",
    "extension-apiserver-authentication-reader", "vgpu-scheduler-kube-scheduler",
}


Exercise = Callable[[RunningApiServer, Path], None]


@dataclass(frozen=True)
class Call:
    verb: str
    resource: str  # with subresource: pods/binding
    group: str
    namespace: str | None
    name: str | None


def call_of(method: str, path: str, query: dict[str, str]) -> Call:
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), rest[2:]
    if sub:
        resource = f"{resource}/{sub[0]}"
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        verb = "get" if name else ("watch" if query.get("watch") == "true" else "list")
    if verb == "create" and sub:
        name = None  # a subresource create is authorized on the parent's name; never limited here
    return Call(verb, resource, group, namespace, name)


def recorded(api: RunningApiServer) -> set[Call]:
    """The adapters' requests; the test's own (set-up, damage) go through httpx."""
    return {
        call_of(str(r.method.value).upper(), r.url.path, dict(r.url.query))
        for r in api.emulator
        if not r.headers.get("User-Agent", "").startswith("python-httpx")
    }


def wait(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def seed(api: RunningApiServer) -> None:
    api.create("/api/v1/nodes", node_manifest("gpu-1"))
    api.create("/api/v1/namespaces/default/pods", pod_manifest("default", "p1", node_name="gpu-1"))
    api.create("/api/v1/namespaces/default/pods", pod_manifest("default", "unbound"))


def exercise_cluster(api: RunningApiServer, **options: Any) -> None:
    cluster = KubernetesCluster.connect(ConnectionSettings(host=api.url), **options)
    try:
        cluster.get_node("gpu-1")  # before the caches sync: live reads
        cluster.get_pod("default", "p1")
        cluster.list_pods("gpu-1")
        cluster.start()
        assert cluster.wait_synced(10)
        cluster.patch_pod_annotations("default", "p1", {"hami.io/bind-phase": "allocating"})
        cluster.patch_node_annotations("gpu-1", {"example.com/x": "1"})
        cluster.lock_node("gpu-1", "default", "p1", timedelta(minutes=5))
        cluster.release_node_lock("gpu-1", "default", "p1")
        cluster.record_event("default", "p1", "Test", "recorded for the RBAC test")
        if options.get("watch_quotas", True):
            pod = api.get("/api/v1/namespaces/default/pods/unbound")
            assert pod is not None
            cluster.bind("default", "unbound", pod["metadata"]["uid"], "gpu-1")
    finally:
        cluster.stop()


def grant_keys(api: RunningApiServer) -> SecretGrantKeys:
    client = new_api_client(ConnectionSettings(host=api.url))
    return SecretGrantKeys(client, NAMESPACE, "vgpu-grant-keys")


def exercise_scheduler(api: RunningApiServer, tmp_path: Path) -> None:
    exercise_cluster(api)
    keys = grant_keys(api)  # the scheduler creates the grant signing keys, then reads them
    if keys.load() is None:
        keys.create(KeyRing({"k1": bytes(32)}))
    client = new_api_client(ConnectionSettings(host=api.url))
    elector = LeaderElector(client, identity="a", name="vgpu-scheduler", namespace=NAMESPACE,
                            lease_duration_s=3, renew_deadline_s=2, retry_period_s=0.1)
    elector.start()
    assert elector.wait_for_leadership(10)
    elector.stop(release=True)
    api.create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "vgpu-webhook"}, "webhooks": [],
    })
    config = WebhookCertsConfig(secret_namespace=NAMESPACE, cert_dir=tmp_path)
    store = KubernetesWebhookTLS(client, namespace=NAMESPACE, secret_name=config.secret_name,
                                 webhook_name=config.webhook_name)
    certs = WebhookCerts(config, store, lambda c, k: None)
    certs.ensure()
    secret = f"/api/v1/namespaces/{NAMESPACE}/secrets/{config.secret_name}"
    api.merge_patch(secret, {"data": {"tls.crt": ""}})  # damaged: the next check rewrites it
    certs.rotate_if_due()


def kubeconfig_of(api: RunningApiServer, tmp_path: Path) -> Path:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
        "clusters": [{"name": "emulator", "cluster": {"server": api.url}}],
        "users": [{"name": "component", "user": {}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "component"}}],
    }))
    return kubeconfig


def exercise_monitor(api: RunningApiServer, tmp_path: Path) -> None:
    """The monitor's own composition root, as `vgpu monitor` builds it, through a kubeconfig."""
    kubeconfig = kubeconfig_of(api, tmp_path)
    cluster = make_cluster(MonitorConfig(node_name="gpu-1", kubeconfig=kubeconfig))
    try:
        assert cluster.wait_synced(10)
        assert [p.name for p in cluster.list_pods("gpu-1")] == ["p1"]
    finally:
        cluster.stop()


def exercise_device_plugin(api: RunningApiServer, tmp_path: Path) -> None:
    exercise_cluster(api, pod_field_selector="spec.nodeName=gpu-1",
                     node_field_selector="metadata.name=gpu-1", watch_quotas=False)
    grant_keys(api).load()  # verifying grants


def making_claims(exercise: Exercise) -> Exercise:
    """`exercise`, then the webhook's DRA mode as the scheduler builds it: a pod whose memory
    percentage needs the cluster's cards (the slices) and whose template is made."""

    def both(api: RunningApiServer, tmp_path: Path) -> None:
        exercise(api, tmp_path)
        config = SchedulerConfig(kubeconfig=kubeconfig_of(api, tmp_path))
        pod = pod_manifest("default", "dra", limits={
            "nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50,
        })
        decision = build_dra_admission(config, None).admit(pod, "default")
        assert decision.allowed, decision.message

    return both


def reviewing_scrapes(exercise: Exercise) -> Exercise:
    """`exercise`, then what a secure metrics listener asks about a scrape's token."""

    def both(api: RunningApiServer, tmp_path: Path) -> None:
        exercise(api, tmp_path)
        api.accept_token("prometheus-token", "prometheus")
        reviews = KubernetesAccessReview(new_api_client(ConnectionSettings(host=api.url)))
        identity = reviews.review_token("prometheus-token").identity
        assert identity is not None
        reviews.review_access(identity, "get", "/metrics")

    return both


@dataclass(frozen=True)
class Rule:
    role: str
    namespace: str | None  # None: a ClusterRole bound cluster-wide
    group: str
    verb: str
    resource: str
    names: tuple[str, ...]

    def allows(self, call: Call) -> bool:
        return (
            (self.namespace is None or self.namespace == call.namespace)
            and (self.group, self.verb, self.resource) == (call.group, call.verb, call.resource)
            and (not self.names or call.name in self.names)
        )


def rules_for(account: str, objects: list[dict[str, Any]]) -> list[Rule]:
    roles = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")): o
             for o in objects if o["kind"] in ("Role", "ClusterRole")}
    found = []
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("name") == account for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        if ref["name"] in KUBE_SCHEDULER_ROLES:
            continue
        namespace = binding["metadata"].get("namespace")
        role = roles[(ref["kind"], ref["name"], namespace if ref["kind"] == "Role" else None)]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for verb in rule["verbs"]:
                    for resource in rule["resources"]:
                        found.append(Rule(ref["name"], namespace, group, verb, resource,
                                          tuple(rule.get("resourceNames", ()))))
    return found


def unexplained(calls: Iterable[Call], rules: list[Rule]) -> list[Call]:
    return [c for c in calls if not any(r.allows(c) for r in rules)]


COMPONENTS: dict[str, tuple[str, Exercise, tuple[str, ...]]] = {
    "scheduler": ("vgpu-scheduler", exercise_scheduler, ()),
    "device-plugin": ("vgpu-device-plugin", exercise_device_plugin, ()),
    "monitor": (MONITOR, exercise_monitor, ()),
    "scheduler, secure metrics": (
        "vgpu-scheduler", reviewing_scrapes(exercise_scheduler), SECURE_METRICS
    ),
    "monitor, secure metrics": (MONITOR, reviewing_scrapes(exercise_monitor), SECURE_METRICS),
    "scheduler, DRA mode": ("vgpu-scheduler", making_claims(exercise_scheduler), DRA),
    "dra-driver": ("vgpu-dra-driver", lambda api, _: exercise_dra_driver(api), DRA),
    "monitor, DRA nodes only": (MONITOR, exercise_monitor, (*DRA, "devicePlugin.enabled=false")),
}


def test_every_module_that_calls_the_api_is_exercised_here() -> None:
    callers = {p.name for p in ADAPTERS.glob("*.py") if "self._api." in p.read_text()
               or "KubeApi(" in p.read_text()}
    missing = callers - EXERCISED
    assert missing == set(), "add the new module's calls to this test and the chart"


def exercise_dra_driver(api: RunningApiServer) -> None:
    """What `vgpu dra-driver` asks of the API: its node's pods (a watch cache), its slices
    (list, create, replace, delete a stale one), a claim and the pods it is reserved for."""
    cluster = KubernetesCluster.connect(
        ConnectionSettings(host=api.url), pod_field_selector="spec.nodeName=gpu-1",
        node_field_selector="metadata.name=gpu-1", watch_nodes=False, watch_quotas=False,
    )
    try:
        cluster.start()
        assert cluster.wait_synced(10)
        cluster.list_pods("gpu-1")
    finally:
        cluster.stop()
    dra = KubernetesDraApi.connect(ConnectionSettings(host=api.url))
    spec = {"driver": "gpu.vgpu.io", "nodeName": "gpu-1",
            "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1}, "devices": []}
    for name in ("gpu-1-gpu.vgpu.io", "stale"):
        dra.create_slice({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                          "metadata": {"name": name}, "spec": spec})
    mine = next(s for s in dra.list_slices("gpu.vgpu.io", "gpu-1")
                if s["metadata"]["name"] != "stale")
    dra.replace_slice({**mine, "spec": {**spec, "pool": {**spec["pool"], "generation": 2}}})
    dra.delete_slice("stale")
    dra.get_claim("default", "c1")
    dra.get_pod("default", "p1")


def test_the_dra_driver_makes_exactly_these_calls(k8s_api: RunningApiServer) -> None:
    seed(k8s_api)
    exercise_dra_driver(k8s_api)
    assert recorded(k8s_api) == {
        Call("list", "pods", "", None, None),
        Call("watch", "pods", "", None, None),
        Call("list", "resourceslices", "resource.k8s.io", None, None),
        Call("create", "resourceslices", "resource.k8s.io", None, None),
        Call("update", "resourceslices", "resource.k8s.io", None, "gpu-1-gpu.vgpu.io"),
        Call("delete", "resourceslices", "resource.k8s.io", None, "stale"),
        Call("get", "resourceclaims", "resource.k8s.io", "default", "c1"),
        Call("get", "pods", "", "default", "p1"),
    }


@pytest.mark.parametrize("component", COMPONENTS)
def test_the_chart_grants_exactly_the_calls_the_component_makes(
    component: str, k8s_api: RunningApiServer, tmp_path: Path
) -> None:
    account, exercise, set_values = COMPONENTS[component]
    seed(k8s_api)
    exercise(k8s_api, tmp_path)
    calls = recorded(k8s_api)
    assert len(calls) >= (2 if account == MONITOR else 8)
    rules = rules_for(account, template(set_values=set_values))
    assert unexplained(calls, rules) == []
    unused = {
        (r.role, r.verb, r.resource, r.names)
        for r in rules
        if (component, r.verb, r.resource) not in PENDING
        and not any(r.allows(c) for c in calls)
    }
    assert unused == set()


def test_a_call_outside_the_grants_is_reported() -> None:
    rules = rules_for("vgpu-device-plugin", template())
    delete = Call("delete", "pods", "", "default", "p1")
    other_secret = Call("get", "secrets", "", NAMESPACE, "vgpu-scheduler-tls")
    assert unexplained([delete, other_secret], rules) == [delete, other_secret]


def test_the_monitor_runs_under_its_own_account_which_may_only_read_pods() -> None:
    objects = template()
    pod = one(objects, "DaemonSet", MONITOR)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == MONITOR
    rules = rules_for(MONITOR, objects)
    assert {(r.verb, r.resource) for r in rules} == {("list", "pods"), ("watch", "pods")}
    plugin_rules = rules_for("vgpu-device-plugin", objects)
    assert ("patch", "nodes") in {(r.verb, r.resource) for r in plugin_rules}  # not the monitor's
