"""Values that would silently do nothing: a key the chart does not know stops the install
and names the nearest known key; every key of vgpu's values.yaml is described by
values.schema.json, from which known-values.yaml (the check's list) is generated; and HAMi's
values files of every release from v2.4.0 to v2.10.0 still install as they are."""

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.deploy.render import (
    CHART,
    HAMI_BEFORE_V2_7,
    HAMI_VALUES,
    OPERATOR_OVERRIDES,
    REPO,
    helm,
    template,
    template_args,
)

sys.path.insert(0, str(REPO / "scripts"))
import chart_keys

OTHER_RELEASES = Path(__file__).parent / "hami" / "keys-of-other-releases.yaml"


@pytest.mark.parametrize(
    ("setting", "nearest"),
    [
        ("devicePlugin.deviceSplitcount=4", "devicePlugin.deviceSplitCount"),
        ("devicePlugin.monitor.prot=9400", "devicePlugin.monitor.port"),
        ("global.gpuHookpath=/opt", "global.gpuHookPath"),
        ("scheduler.nodeHandshake.hamiversion=v2.8", "scheduler.nodeHandshake.hamiVersion"),
        ("scheduler.defaultSchedulerPolicy.nodeSchedulerpolicy=spread",
         "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy"),
        ("takeover.fromHAMI=true", "takeover.fromHami"),
        ("log.levle=DEBUG", "log.level"),
        ("schedulerNmae=gpu", "schedulerName"),
    ],
)
def test_a_misspelt_value_stops_the_install_naming_the_nearest_known_key(
    setting: str, nearest: str
) -> None:
    key = setting.partition("=")[0]
    for values in ((), (HAMI_VALUES, OPERATOR_OVERRIDES)):
        result = helm(*template_args(*values, set_values=(setting,)))
        assert result.returncode != 0
        assert f"{key} is not a value of this chart: did you mean {nearest}?" in result.stderr


def test_a_key_under_a_free_form_value_is_the_schema_s_or_kubernetes_s_to_judge() -> None:
    objects = template(
        set_values=(
            "devicePlugin.nvidiaNodeSelector.example\\.com/gpu-pool=a",
            "scheduler.podAnnotations.team=ml",
            "devicePlugin.resources.limits.cpu=1",
        )
    )
    assert objects


@pytest.mark.parametrize(
    "values",
    [(HAMI_VALUES,), (HAMI_VALUES, OPERATOR_OVERRIDES), *((v,) for v in HAMI_BEFORE_V2_7),
     (HAMI_VALUES, OTHER_RELEASES)],
    ids=["v2.10.0", "v2.10.0+operator", "v2.4.1", "v2.6.1", "v2.10.0+other releases' keys"],
)
def test_hami_s_values_of_every_release_install_as_they_are(values: tuple[Path, ...]) -> None:
    result = helm(*template_args(*values))
    assert result.returncode == 0, result.stderr


def leaves(values: dict[str, Any], above: str = "") -> set[str]:
    found = set()
    for key, value in values.items():
        if isinstance(value, dict) and value:
            found |= leaves(value, f"{above}{key}.")
        else:
            found.add(f"{above}{key}")
    return found


def known(tree: dict[str, Any], dotted: str) -> bool:
    """`dotted` is a key of the tree, or under one of its leaves."""
    node: Any = tree
    for part in dotted.split("."):
        if node == chart_keys.LEAF:
            return True
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_key_of_vgpu_s_values_is_described_by_the_schema() -> None:
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    tree = chart_keys.schema_tree(schema, schema)
    assert isinstance(tree, dict)
    ours = leaves(yaml.safe_load((CHART / "values.yaml").read_text()))
    assert [key for key in sorted(ours) if not known(tree, key)] == []


def test_the_chart_s_list_of_known_keys_is_the_one_the_schema_gives() -> None:
    assert (CHART / "known-values.yaml").read_text() == chart_keys.render(), (
        "run python scripts/chart_keys.py"
    )


def test_as_a_subchart_the_parent_s_globals_pass_and_a_misspelling_is_still_named(
    tmp_path: Path,
) -> None:
    parent = tmp_path / "platform"
    shutil.copytree(CHART, parent / "charts" / "vgpu")
    (parent / "Chart.yaml").write_text("apiVersion: v2\nname: platform\nversion: 0.1.0\n")
    (parent / "values.yaml").write_text("global:\n  storageClass: fast\n")
    assert helm("template", "p", str(parent)).returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("vgpu:\n  log:\n    levle: DEBUG\n")
    result = helm("template", "p", str(parent), "--values", str(bad))
    assert "log.levle is not a value of this chart: did you mean log.level?" in result.stderr
    alone = helm(*template_args(set_values=("global.storageClass=fast",)))
    assert "did you mean global." in alone.stderr
