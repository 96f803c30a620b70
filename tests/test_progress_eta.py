"""The remaining time progress bars show (simulator.output.progress): the average rate
since the start, so a search whose points finish in bursts (pruned points at once,
then groups simulating for seconds) does not read 0:00:01 for most of its run, as
rich's estimate from the last few updates did."""

from __future__ import annotations

from rich.progress import Progress

from simulator.output.progress import _Remaining, remaining_text


def test_the_estimate_grows_while_nothing_finishes_and_shrinks_as_points_do():
    clock = [0.0]
    bar = Progress(get_time=lambda: clock[0], disable=True)
    task_id = bar.add_task("searching deployments", total=8)
    shown = lambda: _Remaining().render(bar.tasks[0]).plain  # noqa: E731
    assert shown() == "-:--:--"  # nothing done yet: no rate to go by
    clock[0] = 0.1
    bar.update(task_id, completed=3)  # three pruned points at once
    assert shown() == "0:00:01"
    clock[0] = 11.0  # then a group simulating for seconds
    assert shown() == "0:00:19"  # 11 s x 5 left / 3 done, rounded up
    clock[0] = 14.0
    bar.update(task_id, completed=6)
    assert shown() == "0:00:05"
    bar.update(task_id, completed=8)
    assert shown() == "0:00:00"


def test_remaining_text_rounds_up_to_the_second():
    assert remaining_text(0.2) == "0:00:01"
    assert remaining_text(3599.5) == "1:00:00"
    assert remaining_text(3 * 3600 + 61) == "3:01:01"
