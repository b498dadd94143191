"""Scenario files: the embedded default, and errors that name the field and the value."""

import pytest

from vgpu.app.simulate.scenario import (
    ExponentialRuntime,
    Range,
    ScenarioError,
    load_scenario,
    parse_scenario,
)

from .builders import TINY

BASE = """
nodes: [{name: n, count: 1, gpus: 1}]
workloads:
  - name: w
    arrivals_per_hour: 1
    runtime: {distribution: fixed, value: 1h}
"""


def errors(text: str) -> str:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "my.yaml")
    return str(caught.value)


def test_the_embedded_default_is_32_nodes_of_8_a100_split_10_over_a_day() -> None:
    scenario = load_scenario()
    assert [(p.count, p.gpus, p.model, p.split_count) for p in scenario.nodes] == [
        (32, 8, "NVIDIA A100-SXM4-80GB", 10)
    ]
    assert scenario.duration == 86400
    assert len(scenario.workloads) >= 3
    assert any(n.quota is not None for n in scenario.namespaces)


def test_quantities_durations_and_samples_are_read() -> None:
    scenario = parse_scenario(TINY)
    small = scenario.workloads[0]
    assert small.memory == Range[int](min=4096, max=12288)
    assert isinstance(small.runtime, ExponentialRuntime)
    assert small.runtime.mean == 3600
    assert scenario.namespaces[0].quota is not None
    assert scenario.namespaces[0].quota.gpumem == 40960
    assert parse_scenario(BASE.replace("1h}", "1h30m}")).workloads[0].runtime.value == 5400  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("count: 1", "count: 0"),
            "my.yaml: nodes[0].count: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            ("value: 1h", "value: soon"),
            "workloads[0].runtime.value: must be a duration such as 90s",
        ),
        (
            ("distribution: fixed", "distribution: normal"),
            "workloads[0].runtime: Input tag 'normal'",
        ),
        (
            ("arrivals_per_hour: 1", "arrivals_per_hour: 1\n    memory: 20x"),
            "workloads[0].memory: has an unknown unit suffix 'x' (got '20x')",
        ),
        (
            ("arrivals_per_hour: 1", "arrivals_per_hour: 1\n    cores: {choices: [10, 200]}"),
            "workloads[0].cores: 200 is outside 0..100",
        ),
        (
            ("arrivals_per_hour: 1", "arrivals_per_hour: 1\n    gpus: {min: 4, max: 2}"),
            "workloads[0].gpus: min=4 is above max=2",
        ),
        (
            (
                "arrivals_per_hour: 1",
                "arrivals_per_hour: 1\n    memory: 4Gi\n    memory_percent: 50",
            ),
            "workloads[0]: give memory or memory_percent, not both",
        ),
        (
            ("arrivals_per_hour: 1", "arrivals_per_hour: 1\n    namespace: teem"),
            "workloads[0].namespace='teem' is not declared under namespaces",
        ),
        (("name: w", "name: W_1"), "workloads[0].name: must be lower-case letters"),
        (
            ("gpus: 1}", "gpus: 1, colour: red}"),
            "nodes[0].colour: Extra inputs are not permitted (got 'red')",
        ),
    ],
)
def test_an_invalid_scenario_names_the_field_and_value(
    change: tuple[str, str], expected: str
) -> None:
    assert expected in errors(BASE.replace(*change))


def test_every_problem_is_reported_not_just_the_first() -> None:
    text = BASE.replace("count: 1", "count: -1").replace(
        "arrivals_per_hour: 1", "arrivals_per_hour: 0"
    )
    message = errors(text)
    assert "nodes[0].count" in message
    assert "workloads[0].arrivals_per_hour" in message


def test_yaml_that_is_not_a_mapping_or_not_yaml_is_refused_with_the_source() -> None:
    assert errors("- a\n- b\n") == "my.yaml: must be a YAML mapping, not list"
    assert errors("nodes: [").startswith("my.yaml: not valid YAML")


def test_a_missing_file_is_a_scenario_error(tmp_path: object) -> None:
    from pathlib import Path

    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(Path(str(tmp_path)) / "absent.yaml")
