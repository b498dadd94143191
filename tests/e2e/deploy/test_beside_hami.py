"""The migration path from HAMi: vgpu installed beside HAMi with HAMi's values takes nothing
HAMi's chart holds (objects, node ports, Leases, Secrets, RuntimeClass), refuses the settings
that would make the two clash, trusts HAMi's service accounts by the names HAMi's chart gives
them, and the `helm` commands of docs/migrate-from-hami.md, run in order by the helm binary
(`helm_history`), install and upgrade cleanly and do what the guide says they do."""

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.deploy.helm_history import Release, helm_history, objects
from tests.e2e.deploy.render import (
    DEVICE_PLUGIN,
    HAMI_VALUES,
    OPERATOR_OVERRIDES,
    helm,
    notes,
    one,
    template,
    template_args,
)

HAMI_DIR = Path(__file__).parent / "hami"
HAMI = yaml.safe_load((HAMI_DIR / "objects.yaml").read_text())
GUIDE = Path(__file__).resolve().parents[3] / "docs" / "migrate-from-hami.md"
HAMI_NAMESPACE = "kube-system"
# namespaced kinds whose namespace the rendering leaves to the release
CLUSTER_KINDS = {
    "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "RuntimeClass",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}
HAMI_RELEASE_OF = {"v2.10.0": "v2.10", "v2.6.1": "v2.7", "v2.4.1": "v2.7"}


def identity(obj: dict[str, Any]) -> str:
    """`Kind name` or `Kind namespace/name`, as objects.yaml names HAMi's objects."""
    meta = obj["metadata"]
    if obj["kind"] in CLUSTER_KINDS:
        return f"{obj['kind']} {meta['name']}"
    return f"{obj['kind']} {meta.get('namespace', HAMI_NAMESPACE)}/{meta['name']}"


def pinned_node_ports(objects: list[dict[str, Any]]) -> set[int]:
    return {
        port["nodePort"]
        for o in objects
        if o["kind"] == "Service"
        for port in o["spec"]["ports"]
        if "nodePort" in port
    }


def created_at_run_time(objects: list[dict[str, Any]]) -> set[str]:
    """The Leases and Secrets vgpu's processes create, as their rendered settings name them."""
    data = one(objects, "ConfigMap", "vgpu-scheduler")["data"]
    settings = yaml.safe_load(data["scheduler.yaml"])
    election = settings["leader_election"]
    found = {f"Lease {election['namespace']}/{election['lease_name']}"}
    signing = settings["signing"]
    found.add(f"Secret {signing['secret_namespace']}/{signing['secret_name']}")
    if "webhook_tls" in settings:
        tls = settings["webhook_tls"]
        found.add(f"Secret {tls['secret_namespace']}/{tls['secret_name']}")
    if "config.yaml" in data:
        kube = yaml.safe_load(data["config.yaml"])["leaderElection"]
        found.add(f"Lease {kube['resourceNamespace']}/{kube['resourceName']}")
    return found


# --- the guide's commands, as Helm applies them ----------------------------------------------


def guide_commands(*, back: bool = False) -> list[tuple[str, list[str]]]:
    """(section heading, argv) of each `helm install|upgrade vgpu charts/vgpu` in the guide, in
    order: the steps forward, or with `back` the ways back (the blocks after a `Back:`)."""
    found = []
    heading, going_back = "", False
    text = GUIDE.read_text()
    parts = r"^## ([^\n]+)$|^(Back:)|^```bash\n(.*?)^```"
    for part in re.finditer(parts, text, re.MULTILINE | re.DOTALL):
        if part.group(1):
            heading, going_back = part.group(1), False
        elif part.group(2):
            going_back = True
        elif going_back == back:
            for line in part.group(3).replace("\\\n", " ").splitlines():
                argv = shlex.split(line, comments=True)
                if argv[:1] == ["helm"] and "charts/vgpu" in argv:
                    found.append((heading, argv))
    return found


def overlay(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        both = isinstance(below, dict) and isinstance(value, dict)
        merged[key] = overlay(below, value) if both else value  # type: ignore[arg-type]
    return merged


def hami_values_file(tmp_path: Path, *files: Path) -> Path:
    """What `helm get values hami -a` gives for a HAMi installed with these files."""
    merged: dict[str, Any] = {}
    for path in files:
        merged = overlay(merged, yaml.safe_load(path.read_text()))
    target = tmp_path / "hami-values.yaml"
    target.write_text(yaml.safe_dump(merged))
    return target


def step_one_settings(release: str) -> tuple[str, ...]:
    """Step 1's --set flags, with HAMi's own release for the handshake."""
    [(_, argv)] = [c for c in guide_commands() if c[1][1] == "install"]
    flags = [argv[i + 1] for i, word in enumerate(argv) if word in ("--set", "--set-string")]
    assert "scheduler.nodeHandshake.hamiVersion=v2.10" in flags
    flags = [f for f in flags if not f.startswith("scheduler.nodeHandshake.hamiVersion=")]
    return (*flags, f"scheduler.nodeHandshake.hamiVersion={release}")


# --- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "webhook", [False, True], ids=["step 1: webhook off", "step 2: webhook on"]
)
@pytest.mark.parametrize(
    "hami", HAMI["renders"], ids=lambda r: "+".join(v.removesuffix(".yaml") for v in r["values"])
)
def test_vgpu_beside_hami_takes_no_name_port_lease_or_secret_of_hami_s_chart(
    hami: dict[str, Any], webhook: bool
) -> None:
    files = tuple(HAMI_DIR / v for v in hami["values"])
    settings = (
        *step_one_settings(HAMI_RELEASE_OF[hami["chart"]]),
        f"scheduler.admissionWebhook.enabled={str(webhook).lower()}",
    )
    objects = template(
        *files,
        set_values=settings,
        namespace=HAMI_NAMESPACE,
        api_versions=("monitoring.coreos.com/v1",),
    )
    ours = {identity(o) for o in objects} | created_at_run_time(objects)
    assert ours & (set(hami["objects"]) | set(hami["createdAtRunTime"])) == set()
    assert pinned_node_ports(objects) & set(hami["nodePorts"]) == set()
    services = [o for o in objects if o["kind"] == "Service"]
    if "operator-overrides.yaml" in hami["values"]:
        assert {s["spec"]["type"] for s in services} == {"NodePort"}  # the API server picks


def test_once_hami_is_uninstalled_vgpu_takes_its_node_ports_and_runtime_class() -> None:
    settings = (*step_one_settings("v2.10"), "scheduler.admissionWebhook.enabled=true")
    objects = template(
        HAMI_VALUES,
        OPERATOR_OVERRIDES,
        set_values=(*settings, "takeover.hamiInstalled=false"),
        namespace=HAMI_NAMESPACE,
    )
    assert pinned_node_ports(objects) == {31992, 31993, 31998}
    assert one(objects, "RuntimeClass")["metadata"]["name"] == "nvidia"
    # without takeover there is no HAMi beside: HAMi's ports, as when replacing it outright
    plain = template(HAMI_VALUES, OPERATOR_OVERRIDES, namespace=HAMI_NAMESPACE)
    assert pinned_node_ports(plain) == {31992, 31993, 31998}


@pytest.mark.parametrize(
    "settings",
    [
        ("takeover.fromHami=true",),  # HAMi's values name the scheduler hami-scheduler
        ("takeover.fromHami=true", "schedulerName=gpu", "takeover.hamiSchedulerName=gpu"),
    ],
)
def test_takeover_under_hami_s_scheduler_name_is_refused_saying_why(
    settings: tuple[str, ...],
) -> None:
    result = helm(*template_args(HAMI_VALUES, OPERATOR_OVERRIDES, set_values=settings))
    assert result.returncode != 0
    assert "schedulerName and takeover.hamiSchedulerName are both" in result.stderr
    assert "give vgpu a scheduler name of its own" in result.stderr
    # the same names without takeover: vgpu replaces HAMi outright
    assert helm(*template_args(HAMI_VALUES, OPERATOR_OVERRIDES)).returncode == 0


def test_a_full_name_override_that_gives_hami_s_names_is_refused_beside_hami() -> None:
    settings = (*step_one_settings("v2.10"), "fullnameOverride=hami")
    result = helm(*template_args(HAMI_VALUES, set_values=settings))
    assert result.returncode != 0
    assert 'would name its objects "hami" as HAMi\'s chart names its own' in result.stderr
    accounts = "system:serviceaccount:kube-system:hami-scheduler,"
    accounts += "system:serviceaccount:kube-system:hami-device-plugin"
    assert f"(HAMi's accounts: {accounts})" in result.stderr
    renamed = (*settings, "fullnameOverride=vgpu", f"takeover.hamiServiceAccounts={{{accounts}}}")
    after = helm(*template_args(HAMI_VALUES, set_values=renamed))
    assert after.returncode == 0, after.stderr


@pytest.mark.parametrize("case", HAMI["serviceAccounts"], ids=lambda c: " ".join(
    [c["release"], c["namespace"], *c["set"]]))
def test_hami_s_service_accounts_are_named_as_hami_s_chart_names_them(
    case: dict[str, Any]
) -> None:
    settings = (
        "takeover.fromHami=true",
        "schedulerName=vgpu-scheduler",
        f"takeover.hamiRelease={case['release']}",
        f"takeover.hamiNamespace={case['namespace']}",
        "takeover.hamiInstalled=false",  # a shared fullnameOverride is refused beside HAMi
        *case["set"],
    )
    [policy] = [
        o
        for o in template(HAMI_VALUES, set_values=settings)
        if o["kind"] == "ValidatingAdmissionPolicy"
        and o["metadata"]["name"].endswith("-scheduler-owned-pod-keys")
    ]
    trusted = next(v for v in policy["spec"]["variables"] if v["name"] == "trusted")
    named = set(re.findall(r"'system:serviceaccount:([^:']+):([^']+)'", trusted["expression"]))
    hami = {tuple(account.split("/")) for account in case["serviceAccounts"]}
    assert hami <= named
    assert len(named) == len(hami) + 2  # and vgpu's own two
    text = notes(HAMI_VALUES, set_values=settings)
    for namespace, name in hami:
        assert f"kubectl -n {namespace} get serviceaccount {name}" in text


def test_the_guide_s_commands_install_and_upgrade_cleanly_and_do_what_it_says(
    tmp_path: Path,
) -> None:
    files = {"hami-values.yaml": hami_values_file(tmp_path, HAMI_VALUES, OPERATOR_OVERRIDES)}
    releases: list[tuple[str, Release]] = []
    with helm_history(tmp_path) as history:
        current = None
        for heading, argv in guide_commands():
            current = history.run(argv, files, current)
            releases.append((heading, current))
        # step 4's way back, from the release step 4 made
        [(back_heading, back_argv)] = guide_commands(back=True)
        back = history.run(back_argv, files, releases[2][1])
    assert back_heading.startswith("4.")
    assert [heading.split(".")[0] for heading, _ in releases] == ["1", "2", "4", "5", "5"]
    rendered = [objects(release) for _, release in releases]

    def plugin_selector(objects: list[dict[str, Any]]) -> dict[str, str]:
        selector: dict[str, str] = one(objects, "DaemonSet", DEVICE_PLUGIN)["spec"][
            "template"
        ]["spec"]["nodeSelector"]
        return selector

    def config(objects: list[dict[str, Any]]) -> dict[str, Any]:
        data = one(objects, "ConfigMap", "vgpu-scheduler")["data"]["scheduler.yaml"]
        return dict(yaml.safe_load(data))

    install, webhook_on, hami_gone, takeover_off, selector_back = rendered
    assert config(install)["hami_version"] == "v2.10"
    assert config(install)["takeover"]["from_hami"] is True
    assert not [o for o in install if o["kind"] == "MutatingWebhookConfiguration"]
    assert plugin_selector(install) == {"vgpu.io/device-plugin": "on"}
    assert pinned_node_ports(install) == set()
    assert one(webhook_on, "MutatingWebhookConfiguration")
    assert pinned_node_ports(webhook_on) == set()
    assert pinned_node_ports(hami_gone) == {31992, 31993, 31998}
    assert config(takeover_off)["takeover"]["from_hami"] is False
    assert plugin_selector(takeover_off) == {"vgpu.io/device-plugin": "on"}
    # replaced on the first try, not merged: the guide then removes vgpu.io/device-plugin
    assert plugin_selector(selector_back) == {"gpu": "on"}
    assert plugin_selector(objects(back)) == {"vgpu.io/device-plugin": "on"}
    assert pinned_node_ports(objects(back)) == set()  # HAMi's node ports free for its chart
    webhook_off = " ".join(releases[0][1]["info"]["notes"].split())
    assert "schedulerName vgpu-scheduler from the webhook" not in webhook_off
    assert "The webhook is off (scheduler.admissionWebhook.enabled=false)" in webhook_off
    assert "schedulerName vgpu-scheduler from the webhook" in releases[1][1]["info"]["notes"]


def test_the_guide_takes_all_of_hami_s_values_and_names_every_leftover() -> None:
    text = GUIDE.read_text()
    commands = re.findall(r"helm [^`\n]*get values[^`\n]*", text)
    assert commands and all(" -a " in f" {c} " for c in commands), commands
    install_md = (GUIDE.parent / "install.md").read_text()
    assert all(" -a " in f" {c} " for c in re.findall(r"helm [^`\n]*get values[^`\n]*", install_md))
    leftovers = text.partition("## What `helm uninstall` leaves behind")[2]
    objects = template()
    for name in sorted(created_at_run_time(objects)):
        assert f"`{name.split('/')[-1]}`" in leftovers, name
    assert "RuntimeClass" in leftovers
