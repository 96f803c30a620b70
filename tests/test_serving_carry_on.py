"""A serving process that would wait for an event no other one waits on carries on at
once when nothing is queued before it (simulator.serving.engine.carry_on), and a
pipelined replica's lanes process the ends of each other's iterations that head the
queue without a SimPy step (PipelinedReplica._drain): the clock reads what processing
each event would set, every other event keeps its order, and a run is the run SimPy
steps through event by event (every request's times and every replica's totals equal,
bit for bit)."""

from __future__ import annotations

import pytest
import simpy
from serving_helpers import LinearTokenCost, run

from simulator.serving import engine
from simulator.serving.engine import at, carry_on
from simulator.serving.spec import ServeSpec

MS = 1e-3
# Costs that are not whole binary fractions, so a clock set another way would differ.
COST = LinearTokenCost(base_s=1.3 * MS, per_token_s=0.07 * MS, per_context_s=3e-7)


def test_carry_on_only_when_nothing_is_queued_at_or_before_the_wake_up():
    env = simpy.Environment()
    assert carry_on(env, 2.5) and env.now == 2.5  # nothing queued: the clock moves
    at(env, 4.0)
    assert not carry_on(env, 4.0) and env.now == 2.5  # a tie: the queued one is first
    assert not carry_on(env, 5.0)
    assert carry_on(env, 3.75) and env.now == 3.75


def digest(spec: ServeSpec, *, kv_blocks: int) -> tuple:
    store, _, times = run(spec, COST, kv_blocks=kv_blocks)
    rows = sorted((r.id, r.first_token_s, r.finish_s, r.preemptions, r.kv_wait_s,
                   r.preempt_lost_s) for r in store.finished + store.dropped)
    return (rows, store.busy_s, store.energy_j, store.iterations, store.stage_busy_s,
            store.pipeline_active_s, times.tpot_s.tolist())


CASES = {
    "one replica": dict(max_batch=8),
    "preemptions": dict(max_batch=16, prompt_tokens=96, output_tokens=40),
    "round robin x3": dict(replicas=3, max_batch=4),
    "shared queue x2": dict(replicas=2, routing="shared_queue", max_batch=4),
    "pipelined pp2": dict(chips=2, pp=2, max_batch=4),
    "pipelined tp2 pp2 x2": dict(chips=4, tp=2, pp=2, replicas=2, max_batch=8,
                                 routing="least_loaded"),
    "static": dict(batching="static", max_batch=4, max_wait_ms=5.0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_run_that_carries_on_is_the_run_simpy_steps_through(name, monkeypatch):
    spec = ServeSpec.model_validate({
        "model": "m", "rate": 300.0, "requests": 150, "prompt_tokens": 48,
        "output_tokens": 24, "arrival": "gamma", "cv": 2.0, "seed": 7, **CASES[name]})
    kv_blocks = 24 if name == "preemptions" else 4096
    answers = []

    def counted(env, when):
        answers.append(carry_on(env, when))
        return answers[-1]

    requeued = []
    enter_next = engine.PipelinedReplica._enter_next

    def counted_entry(self, run, event=None):
        requeued.append(event is not None)
        return enter_next(self, run, event)

    monkeypatch.setattr(engine, "carry_on", counted)
    monkeypatch.setattr(engine.PipelinedReplica, "_enter_next", counted_entry)
    fast = digest(spec, kv_blocks=kv_blocks)
    assert True in answers and False in answers  # both paths taken
    if "pipelined" in name:  # iterations' ends taken from the queue and a lane waiting
        assert True in requeued and False in requeued
    monkeypatch.setattr(engine, "carry_on", lambda env, when: False)
    monkeypatch.setattr(engine.PipelinedReplica, "_drain", lambda self, own: False)
    stepped = digest(spec, kv_blocks=kv_blocks)
    assert fast == stepped
    if name == "preemptions":
        assert sum(row[3] for row in fast[0]) > 0  # the case preempts
