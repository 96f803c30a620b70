"""Engines replay a tile program: `simpy` (engines.des, the model of record) and `fast`
(engines.fast, a compiled kernel giving identical cycles). `auto` picks the fast kernel
unless the run needs a feature only the SimPy model has (none yet). This face holds the
names only, so option parsing does not load Numba or SimPy; engines.runner maps a name
to its replay function."""

from __future__ import annotations

from simulator.errors import AccsimError

ENGINE_CHOICES = ("auto", "fast", "simpy")


def unknown_engine(name: str) -> AccsimError:
    return AccsimError(f"unknown engine {name!r} (choose from {', '.join(ENGINE_CHOICES)})",
                       field="engine")


def choose_engine(requested: str) -> tuple[str, str]:
    """(engine to run, why): auto means the fast kernel, which implements every feature
    the lowering emits today."""
    if requested == "auto":
        return "fast", "auto: the fast kernel supports every feature of this run"
    if requested in ENGINE_CHOICES:
        return requested, "requested"
    raise unknown_engine(requested)
