"""Engines replay a tile program: `simpy` (engines.des, the model of record) and `fast`
(engines.fast, a compiled kernel giving identical cycles). `auto` picks the fast kernel
unless the run needs a feature only the SimPy model has (none yet)."""

from __future__ import annotations

from simulator.errors import AccsimError

ENGINE_CHOICES = ("auto", "fast", "simpy")


def engine_runner(name: str):
    """The replay function of an engine name ("fast" or "simpy")."""
    if name == "fast":
        from simulator.engines.fast import run_fast
        return run_fast
    if name == "simpy":
        from simulator.engines.des import run_des
        return run_des
    raise AccsimError(f"unknown engine {name!r} (choose from {', '.join(ENGINE_CHOICES)})",
                      field="engine")


def choose_engine(requested: str) -> tuple[str, str]:
    """(engine to run, why): auto means the fast kernel, which implements every feature
    the lowering emits today."""
    if requested == "auto":
        return "fast", "auto: the fast kernel supports every feature of this run"
    if requested in ENGINE_CHOICES:
        return requested, "requested"
    engine_runner(requested)  # raises naming the choices
    raise AssertionError("unreachable")
