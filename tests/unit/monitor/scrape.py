"""Prometheus text as `{(name, frozenset(labels)): value}`, for comparing scrapes."""

from prometheus_client.parser import text_string_to_metric_families

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Series:
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def series(found: Series, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: value for (n, labels), value in found.items() if n == name}


def key(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset({**labels, "zone": "vGPU"}.items())
