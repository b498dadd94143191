"""Settings for the whole suite."""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` run first. The suite runs on pytest-xdist workers, each taking whole
    files; a long file picked up last would leave one worker running it alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
