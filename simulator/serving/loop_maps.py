"""Maps from int64 keys to (seconds, joules) pairs in arrays, for the compiled serving
loop's cost tables keyed by two numbers (loop_prices.CostTables: prefill attention by
(new << 32 | cached), a call by call_key): an open-addressing hash table (linear
probing) that the kernels read and add to, and the driver fills and enlarges.

Why not Numba's typed dictionary: the loop's kernels are compiled without reference
counting (loop_state.LOOP), which a typed dictionary needs. Keys are >= 0 (EMPTY marks
a free slot); a map holds at most half its slots (`has_room`), so a probe ends."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.kernels.jit import njit
from simulator.serving.loop_state import LOOP

EMPTY = -1
MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # the golden ratio's 64 bits, as an int64


class PairMap(NamedTuple):
    """Slots of keys (EMPTY where free) and their (seconds, joules) rows; `used`
    holds the number of keys."""

    keys: np.ndarray
    values: np.ndarray
    used: np.ndarray


@njit(**LOOP)
def slot_of(keys, key):
    """The slot holding `key`, else the free slot where it would go."""
    mask = keys.shape[0] - 1
    mixed = key * MIX
    at = (mixed ^ (mixed >> 29)) & mask
    while keys[at] != key and keys[at] != EMPTY:
        at = (at + 1) & mask
    return at


@njit(**LOOP)
def has_room(pairs):
    """Whether one more key keeps the map at most half full."""
    return 2 * (pairs.used[0] + 1) <= pairs.keys.shape[0]


@njit(**LOOP)
def put(pairs, at, key, seconds, joules):
    """Key `key` into its free slot `at` (slot_of) with its pair."""
    pairs.keys[at] = key
    pairs.values[at, 0], pairs.values[at, 1] = seconds, joules
    pairs.used[0] += 1


@njit(**LOOP)
def fill(pairs, keys, values):
    """pairs[keys[i]] = values[i] for every i (the map must have room)."""
    for i in range(keys.shape[0]):
        at = slot_of(pairs.keys, keys[i])
        if pairs.keys[at] == EMPTY:
            put(pairs, at, keys[i], values[i, 0], values[i, 1])
        else:
            pairs.values[at, 0], pairs.values[at, 1] = values[i, 0], values[i, 1]


def pair_map(keys: np.ndarray, values: np.ndarray, room: int = 0) -> PairMap:
    """A map of the keys (int64, >= 0) and their (seconds, joules) rows, with room
    for `room` more keys."""
    size = 16
    while size < 2 * (len(keys) + room):
        size *= 2
    pairs = PairMap(keys=np.full(size, EMPTY, dtype=np.int64), values=np.zeros((size, 2)),
                    used=np.zeros(1, dtype=np.int64))
    fill(pairs, keys, values)
    return pairs


def with_room(pairs: PairMap) -> PairMap:
    """The map, or a copy twice its size where it lacks room for one more key."""
    if has_room(pairs):
        return pairs
    held = pairs.keys != EMPTY
    return pair_map(pairs.keys[held], pairs.values[held], room=len(pairs.keys))


def set_pair(pairs: PairMap, key: int, pair) -> PairMap:
    """The map with pairs[key] = pair (the driver's: enlarged where it lacks room)."""
    pairs = with_room(pairs)
    fill(pairs, np.array([key], dtype=np.int64), np.array([pair], dtype=np.float64))
    return pairs
