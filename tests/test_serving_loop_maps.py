"""The compiled serving loop's PairMap (simulator.serving.loop_maps): every key put in
is found with its pair, colliding keys included, across enlargements; a free slot is
never taken for a key it does not hold; a map is never more than half full."""

from __future__ import annotations

import numpy as np

from simulator.serving.loop_maps import (EMPTY, has_room, pair_map, set_pair, slot_of,
                                         with_room)


def _lookup(pairs, key):
    at = slot_of(pairs.keys, key)
    return None if pairs.keys[at] != key else tuple(pairs.values[at])


def test_every_key_found_with_its_pair():
    rng = np.random.default_rng(7)
    news = rng.integers(1, 4096, 300)
    cached = rng.integers(0, 1 << 20, 300)
    keys = np.unique(news << 32 | cached)
    values = np.stack([keys * 1e-6, keys * 2e-3], axis=1)
    pairs = pair_map(keys, values)
    assert 2 * pairs.used[0] <= len(pairs.keys) and pairs.used[0] == len(keys)
    for key, (seconds, joules) in zip(keys.tolist(), values.tolist()):
        assert _lookup(pairs, key) == (seconds, joules)
    assert _lookup(pairs, (5000 << 32) | 3) is None  # absent: a free slot
    assert _lookup(pairs, 0) is None


def test_colliding_keys_and_enlargement():
    pairs = pair_map(np.zeros(0, dtype=np.int64), np.zeros((0, 2)))
    size = len(pairs.keys)
    home = slot_of(pairs.keys, 1)
    keys = [key for key in range(1, 2000) if slot_of(pairs.keys, key) == home][:5]
    assert len(keys) == 5  # five keys whose probes start at the same slot
    for key in keys:
        pairs = set_pair(pairs, key, (float(key), -float(key)))
    assert len(pairs.keys) == size  # five of sixteen: room without enlarging
    assert [slot_of(pairs.keys, key) for key in keys] == \
        [(home + i) % size for i in range(5)]  # linear probing: the next free slots
    more = keys + [key for key in range(2000, 2040)]
    for key in more[5:]:
        pairs = set_pair(pairs, key, (float(key), -float(key)))
    assert len(pairs.keys) > size and pairs.used[0] == len(more)
    assert 2 * pairs.used[0] <= len(pairs.keys)
    for key in more:
        assert _lookup(pairs, key) == (float(key), -float(key))
    pairs = set_pair(pairs, keys[3], (1.5, 2.5))  # a held key: its pair replaced
    assert pairs.used[0] == len(more) and _lookup(pairs, keys[3]) == (1.5, 2.5)


def test_room_is_at_most_half_full():
    pairs = pair_map(np.arange(7, dtype=np.int64), np.ones((7, 2)))
    assert len(pairs.keys) == 16 and has_room(pairs)
    pairs = set_pair(pairs, 7, (1.0, 1.0))
    assert pairs.used[0] == 8 and not has_room(pairs)
    grown = with_room(pairs)
    assert len(grown.keys) > 16 and has_room(grown)
    assert sorted(grown.keys[grown.keys != EMPTY].tolist()) == list(range(8))
    assert with_room(grown) is grown
