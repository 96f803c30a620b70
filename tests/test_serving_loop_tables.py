"""The compiled serving loop's tables kept on the cost model (loop_tables.KeptTables):
after the memos gain entries, a run's tables hold exactly what tables built afresh
from the memos hold, and a run writing into its tables leaves the kept ones as they
were."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from simulator.serving.loop_maps import EMPTY
from simulator.serving.loop_tables import KeptTables


def _cost(link):
    """A stand-in for LlmCost: the memos and grid points loop_tables reads."""
    cost = SimpleNamespace(_dense_memo={}, _decode_memo={}, _dense={}, _decode={},
                           _pair={}, _prefill={}, _call_memo={},
                           platform=SimpleNamespace(runtime=SimpleNamespace(
                               host_link=link)))
    cost._decode_at = lambda context: (cost._decode[context], cost._pair[context])
    return cost


def _grow(cost, rng, step):
    """Entries the memos gain in a run."""
    for _ in range(step):
        tokens = int(rng.integers(1, 600))
        cost._dense_memo.setdefault(tokens, (tokens * 1e-6, tokens * 1e-3))
        cost._dense.setdefault(tokens, (tokens * 2e-6, tokens * 2e-3))
        cost._decode_memo.setdefault(tokens, ((tokens * 1e-7, 1.0), (3e-5, 2.0)))
        cost._decode.setdefault(tokens, (tokens * 3e-6, 3.0))
        cost._pair.setdefault(tokens, (tokens * 4e-6, 4.0))
        key = (tokens, int(rng.integers(0, 1 << 20)))
        cost._prefill.setdefault(key, (key[1] * 1e-9, 5.0))
        cost._call_memo.setdefault((tokens, step), SimpleNamespace(seconds=1e-5 * step,
                                                                   energy_j=6.0))


def _content(tables):
    """What each table holds: known rows by index, a map's pairs by key."""
    held = {}
    for name in ("dense", "decode", "grid", "dense_grid"):
        rows, known = getattr(tables, name), getattr(tables, name + "_known")
        held[name] = {index: tuple(rows[index]) for index in np.flatnonzero(known)}
    for name in ("call", "prefill_grid"):
        pairs = getattr(tables, name)
        used = pairs.keys != EMPTY
        held[name] = dict(zip(pairs.keys[used].tolist(), map(tuple, pairs.values[used])))
        assert len(held[name]) == pairs.used[0]
    return held


def test_kept_tables_hold_what_fresh_ones_do():
    for link in (None, object()):
        rng = np.random.default_rng(3)
        cost, kept = _cost(link), KeptTables()
        for step in (0, 5, 0, 40, 1, 300, 0):
            _grow(cost, rng, step)
            tables = kept.tables(cost)
            fresh = KeptTables().tables(cost)
            assert _content(tables) == _content(fresh)
            assert len(_content(tables)["call"]) == (len(cost._call_memo) if link else 0)
            assert len(_content(tables)["prefill_grid"]) == len(cost._prefill)
            for name in ("dense", "decode", "grid", "dense_grid"):  # a run's writes
                getattr(tables, name)[:] = -1.0
                getattr(tables, name + "_known")[:] = True
            tables.prefill_grid.keys[:] = 7
            assert _content(kept.tables(cost)) == _content(fresh)
