"""validate_program's rules as one compiled pass over a program's arrays, for the fast
engine: the search replays tens of thousands of small candidate programs, and checking
each with a dozen array operations cost about as much as replaying it.

`validate_fast` runs the compiled check; only a program it finds broken goes to
`validate_program`, whose first broken rule is the error raised, so the errors (and
which programs raise) are validate_program's.
"""

from __future__ import annotations

import numpy as np

from simulator.kernels.jit import njit
from simulator.program.tile_program import MAX_DEPTH, TileProgram, validate_program

_ARRAYS = ("load_bytes", "compute_cycles", "vector_cycles", "store_bytes", "reload_of")
_FLAGS = ("acquire", "release")
# _arrays_valid's argument types, as validate_fast calls it (the kernel library's export).
VALID_TYPES = ("(" + ", ".join(["int64[::1]"] * 3 + ["boolean[::1]"] * 2
                               + ["int64[::1]"] * 3 + ["int64"]) + ")")


@njit(cache=True)
def _arrays_valid(load, compute, vector, acquire, release, store, reload_of, evacuation,
                  slots):
    """Whether the step arrays keep validate_program's per-step rules: non-negative
    bytes and cycles (evacuation's where given: a 0-length array means none), compute
    >= 1, a storing step releases, releases keep pace with acquisitions (the n-th at or
    after the n-th acquisition, and the one freeing the slot of acquisition n before
    it, `slots` slots) and outnumber them, and a partial-sum reload reads an earlier
    releasing step."""
    steps = load.shape[0]
    acquisitions = 0
    releases = 0
    for i in range(steps):
        if load[i] < 0 or vector[i] < 0 or store[i] < 0 or compute[i] < 1:
            return False
        if evacuation.shape[0] > 0 and evacuation[i] < 0:
            return False
        if store[i] > 0 and not release[i]:
            return False
        source = reload_of[i]
        if source >= 0 and (source >= i or not release[source]):
            return False
    # The n-th release at or after the n-th acquisition; acquisition n (n >= slots)
    # after the release n - slots.
    acquired = np.empty(steps, np.int64)
    released = np.empty(steps, np.int64)
    for i in range(steps):
        if acquire[i]:
            acquired[acquisitions] = i
            acquisitions += 1
        if release[i]:
            released[releases] = i
            releases += 1
    if releases < acquisitions:
        return False
    for n in range(acquisitions):
        if released[n] < acquired[n]:
            return False
        if n >= slots and released[n - slots] >= acquired[n]:
            return False
    return True


def header_valid(program: TileProgram) -> bool:
    """Whether the program's header keeps validate_program's rules: steps, depth,
    slots and overhead."""
    return (program.steps >= 1 and 1 <= program.depth <= MAX_DEPTH
            and program.slots >= program.depth and program.overhead_cycles >= 0)


def validate_fast(program: TileProgram, *, source: str = "tile program") -> None:
    """validate_program(program), its array rules compiled: the same programs raise,
    with validate_program's error."""
    arrays = [getattr(program, name) for name in _ARRAYS]
    flags = [getattr(program, name) for name in _FLAGS]
    evacuation = program.evacuation_cycles
    steps = program.steps
    typed = (all(a.dtype == np.int64 and a.ndim == 1 and a.shape[0] == steps
                 and a.flags.c_contiguous for a in arrays)
             and all(f.dtype == np.bool_ and f.ndim == 1 and f.shape[0] == steps
                     and f.flags.c_contiguous for f in flags)
             and (evacuation is None
                  or (evacuation.dtype == np.int64 and evacuation.ndim == 1
                      and evacuation.shape[0] == steps
                      and evacuation.flags.c_contiguous)))
    header = header_valid(program)
    load, compute, vector, store, reload_of = arrays
    if typed and header and _arrays_valid(
            load, compute, vector, flags[0], flags[1], store, reload_of,
            np.zeros(0, np.int64) if evacuation is None else evacuation,
            int(program.slots)):
        return
    validate_program(program, source=source)
