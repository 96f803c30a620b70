"""The replay function of an engine name (DESIGN.md section 5)."""

from __future__ import annotations

import importlib

from simulator.engines import unknown_engine

# Each engine's replay function: (module, name). A module is imported only when its
# engine runs, so a run on the fast engine never imports SimPy.
RUNNERS = {"fast": ("simulator.engines.nest_replay", "run_streamed"),
           "simpy": ("simulator.engines.des", "run_des")}


def engine_runner(name: str):
    """The replay function of an engine name ("fast" or "simpy")."""
    if name not in RUNNERS:
        raise unknown_engine(name)
    module, function = RUNNERS[name]
    return getattr(importlib.import_module(module), function)
