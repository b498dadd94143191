"""`vgpu simulate --trace FILE --print-typical-shapes`: the trace's typical shapes as the chart's
`scheduler.fragmentation.typicalShapes` value, the same shapes the scheduler takes from the
file itself (`fragmentation.typical_shapes_file`)."""

from pathlib import Path

import pytest
import yaml

from vgpu.app.cli import main
from vgpu.app.scheduler.config import SchedulerConfig

PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + "".join(
    f"p-{i:03d},{3152 + 1000 * (i % 3)},4096,{(0, 1, 1, 2)[i % 4]},"
    f"{(0, 460, 1000, 1000)[i % 4]},{'T4|P100' if i % 4 == 3 else ''}\n"
    for i in range(40)
)


def test_the_printed_value_holds_the_shapes_the_scheduler_reads_from_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS)
    assert main(["simulate", "--trace", str(pods), "--print-typical-shapes"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)["typicalShapes"]
    # the commonest (4 pods each), the largest of them first: two whole cards
    assert printed[0] == {
        "gpus": 2, "memoryPercent": 100, "cores": 100, "cpu": "3152m", "hostMemory": "4096Mi",
        "gputype": "P100,T4", "weight": 4,
    }
    snake = {"memoryPercent": "memory_percent", "hostMemory": "host_memory"}
    as_config = [{snake.get(key, key): v for key, v in shape.items()} for shape in printed]
    given = SchedulerConfig.model_validate({"fragmentation": {"typical_shapes": as_config}})
    read = SchedulerConfig.model_validate({"fragmentation": {"typical_shapes_file": pods}})
    assert given.fragmentation.given_shapes() == read.fragmentation.given_shapes()
    assert len(printed) == 12  # every (cpu, gpus, milli, models) of these pods, 95 % of 40


def test_it_applies_to_a_trace_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--print-typical-shapes"]) == 2
    assert "--print-typical-shapes applies to a trace replay (--trace)" in capsys.readouterr().err
