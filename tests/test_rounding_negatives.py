"""Physical shares computed as differences never come out negative from float rounding
(issue 23 item 6): a pipeline without a bubble whose busy and active times are summed
in different orders rounds 1 - busy / (stages x active) to -4.4e-16 unless clamped."""

from __future__ import annotations

from simulator.serving.metrics import MetricsStore

STAGES = 4
STEPS = [0.48022697301760287, 0.7437306552931983, 0.404288093852356,
         0.6647435216084674, 0.36712383142708804]


def test_a_pipeline_without_a_bubble_reports_zero_not_a_tiny_negative():
    store = MetricsStore(1)
    for seconds in STEPS:  # every stage busy for the whole step: no bubble at all
        store.on_pipeline_active(0, seconds)
        for _ in range(STAGES):
            store.on_stage_busy(0, seconds)
    unclamped = 1.0 - sum(store.stage_busy_s) / (STAGES * sum(store.pipeline_active_s))
    assert unclamped < 0  # the case: rounding alone makes it negative
    assert store.pipeline_bubble_fraction(STAGES) == 0.0


def test_a_real_bubble_is_kept():
    store = MetricsStore(1)
    store.on_pipeline_active(0, 1.0)
    store.on_stage_busy(0, 3.0)
    assert store.pipeline_bubble_fraction(4) == 0.25
    assert MetricsStore(1).pipeline_bubble_fraction(4) is None
