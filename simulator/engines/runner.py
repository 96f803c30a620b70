"""The replay function of an engine name (DESIGN.md section 5)."""

from __future__ import annotations

from simulator.engines import unknown_engine
from simulator.engines.des import run_des
from simulator.engines.nest import run_streamed

RUNNERS = {"fast": run_streamed, "simpy": run_des}


def engine_runner(name: str):
    """The replay function of an engine name ("fast" or "simpy")."""
    if name not in RUNNERS:
        raise unknown_engine(name)
    return RUNNERS[name]
