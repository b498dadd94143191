"""Start real `vgpu scheduler` processes for a test; every one is stopped afterwards."""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.scheduler.harness import SchedulerProcess

Launch = Callable[..., SchedulerProcess]


@pytest.fixture()
def launch(tmp_path: Path) -> Iterator[Launch]:
    started: list[SchedulerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, **options: Any) -> SchedulerProcess:
        name = options.pop("name", f"scheduler-{len(started)}")
        ready = options.pop("ready", True)
        process = SchedulerProcess(tmp_path, args, env, name=name, **options)
        started.append(process)
        return process.start(ready=ready)

    yield start
    for process in started:
        process.close()
