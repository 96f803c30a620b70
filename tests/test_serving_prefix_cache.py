"""Prefix caching by trace column (simulator.serving.prefix_cache): requests of one
prefix_id read the first computer's cached blocks instead of prefilling them, distinct
ids serve exactly as no columns, a small KV cache evicts cached prefixes (fewer hits),
the blocks always add up, and bad columns or contradicting options get one clear error.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from serving_helpers import LinearTokenCost, run
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.errors import AccsimError
from simulator.serving.kv_cache import HostTier
from simulator.serving.prefix_cache import PrefixCachingKvCache, PrefixStats
from simulator.serving.requests import Request
from simulator.serving.serve import Setup, simulate_serving
from simulator.serving.spec import ServeSpec
from simulator.serving.arrival_trace import load_trace

ARCH = "tpu_v5e_like"


def _trace(tmp_path, rows, name="t.csv", prefix=True) -> str:
    """A trace of (arrival, prompt, output[, prefix_id, prefix_len]) rows."""
    header = "arrival_s,prompt_tokens,output_tokens" + (",prefix_id,prefix_len"
                                                         if prefix else "")
    path = tmp_path / name
    path.write_text(header + "\n" + "".join(",".join(str(v) for v in row) + "\n"
                                            for row in rows))
    return str(path)


def _serve(path, kv_blocks, **fields):
    spec = ServeSpec(model="m", arrival_trace=path, **fields)
    return run(spec, LinearTokenCost(), kv_blocks=kv_blocks)


def test_a_shared_prefix_lowers_ttft_and_saves_its_tokens(tmp_path):
    """Eight requests 50 ms apart (each prefilled before the next comes), 1,000-token
    prompts sharing 960 tokens: the first computes them, the seven others read 960
    cached tokens (60 blocks) and prefill 40, so their TTFT falls to one iteration."""
    rows = [(0.05 * i, 1000, 4) for i in range(8)]
    plain = _serve(_trace(tmp_path, rows, "plain.csv", prefix=False), 1000)
    shared = _serve(_trace(tmp_path, [row + (7, 960) for row in rows]), 1000)
    stats = shared[0].prefix_cache.record()
    assert stats["lookups"] == 8 and stats["hits"] == 7
    assert stats["tokens_saved"] == 7 * 960 and stats["evicted_blocks"] == 0
    ttft_plain, ttft_shared = plain[2].ttft_s, shared[2].ttft_s
    assert ttft_shared[0] == ttft_plain[0]  # the first computes the prefix
    assert np.all(ttft_shared[1:] < ttft_plain[1:])
    assert ttft_shared[1] == pytest.approx(1e-3 + 40 * 1e-5, rel=1e-9)
    assert plain[0].prefix_cache is None


def test_distinct_prefix_ids_serve_exactly_as_no_columns(tmp_path):
    """No id repeats: nothing hits, and a run on a KV cache so small that the cached
    prefixes are evicted serves every request at the same times as the trace without
    the columns (cached blocks count as free, as vLLM's free queue holds them)."""
    rows = [(0.2 * (i // 3), 300 + 37 * (i % 5), 60 + 11 * (i % 3)) for i in range(24)]
    plain = _serve(_trace(tmp_path, rows, "plain.csv", prefix=False), 100, max_batch=16)
    named = _serve(_trace(tmp_path, [row + (i, row[1] // 2)
                                     for i, row in enumerate(rows)]), 100, max_batch=16)
    assert named[0].prefix_cache.hits == 0 and named[0].prefix_cache.evicted_blocks > 0
    for field in ("latency_s", "ttft_s", "tpot_s"):
        assert getattr(named[2], field).tolist() == getattr(plain[2], field).tolist()
    assert named[0].busy_s == plain[0].busy_s and named[0].energy_j == plain[0].energy_j


def test_a_recomputed_request_reads_its_own_cached_prefix(tmp_path):
    """Distinct ids under preemption: a request preempted after its prefill finds its
    own prefix still cached when it is admitted again (vLLM's recompute does), so the
    hits are readmissions, never more than the preemptions."""
    rows = [(0.0005 * i, 300 + 37 * (i % 5), 60 + 11 * (i % 3)) for i in range(24)]
    store = _serve(_trace(tmp_path, [row + (i, row[1] // 2) for i, row in
                                     enumerate(rows)]), 200, max_batch=16)[0]
    assert 0 < store.prefix_cache.hits <= store.preemptions
    assert store.prefix_cache.lookups == 24 + store.preemptions
    assert len(store.finished) == 24


def test_a_small_kv_cache_evicts_prefixes_and_hits_less(tmp_path):
    """Six prefixes of 30 blocks each, requested in turn twice, one request at a time:
    a cache with room for all keeps them (six hits in the second round); one of 100
    blocks evicts the least recently released, so the second round finds fewer."""
    rows = [(0.05 * i, 500, 2, i % 6, 480) for i in range(12)]
    path = _trace(tmp_path, rows)
    roomy = _serve(path, 1000)[0].prefix_cache
    tight = _serve(path, 100)[0].prefix_cache
    assert roomy.hits == 6 and roomy.evicted_blocks == 0
    assert tight.evicted_blocks > 0 and tight.hits < roomy.hits
    assert tight.tokens_saved < roomy.tokens_saved


def test_a_host_tier_and_prefix_columns_serve_together(tmp_path):
    """Preempted requests swap out and back over a host tier while their prefixes are
    cached: every request finishes; eight arriving at once each compute their prefix
    (a prefix is readable once computed), and the cache reuses the blocks they leave."""
    rows = [(0, 64, 200, i % 2, 48) for i in range(8)]
    spec = ServeSpec(model="m", arrival_trace=_trace(tmp_path, rows), max_batch=8,
                     kv_host_tier=True)
    setup = Setup(spec, None, None, LinearTokenCost(), 40, None,
                  host_tier=HostTier(5e-6, 32e9, 4096))
    store, _ = simulate_serving(setup, spec)
    assert len(store.finished) == 8 and store.swaps > 0
    assert store.prefix_cache.lookups == 8 and store.prefix_cache.hits == 0
    assert store.prefix_cache.evicted_blocks > 0


def _request(id_, prompt, prefix_id, prefix_len) -> Request:
    request = Request(id_, 0.0, prompt, 2, prefix_id=prefix_id, prefix_len=prefix_len)
    request.prefill_target = prompt
    return request


def test_cached_blocks_count_as_free_and_are_evicted_least_recently_released_first():
    cache = PrefixCachingKvCache(12, 16, stats=PrefixStats())
    first, second = _request(0, 64, 1, 64), _request(1, 48, 2, 48)
    assert cache.admit(first) and cache.admit(second)
    first.prefilled, second.prefilled = 64, 48
    cache.release(first)   # its 4 blocks cached, read by none
    cache.release(second)  # 3 more, released later
    assert cache.free_blocks == 12 and cache.idle_blocks == 7
    big = _request(2, 96, -1, 0)  # 6 blocks: 5 truly free, 1 from prefix 1's tail
    assert cache.admit(big) and cache.stats.evicted_blocks == 1
    assert cache.prefixes[1].blocks == 3 and cache.prefixes[2].blocks == 3
    reader = _request(3, 80, 1, 64)  # reads prefix 1's 3 remaining blocks
    assert cache.admit(reader)
    assert reader.prefilled == 48 and reader.shared_blocks == 3
    assert cache.stats.evicted_blocks == 3 and cache.prefixes[2].blocks == 1
    small = _request(4, 16, -1, 0)
    assert cache.admit(small) and 2 not in cache.prefixes and cache.free_blocks == 0
    assert not cache.admit(_request(5, 16, -1, 0))  # nothing left, nothing changed
    assert cache.free_blocks == 0 and cache.stats.lookups == 3  # named a prefix
    for request in (big, reader, small):
        cache.release(request)
    assert cache.free_blocks == 12 and cache.idle_blocks == 3  # prefix 1 stays cached


def test_a_full_hit_leaves_the_last_token_to_compute():
    """A prompt entirely cached still prefills its last block's tokens: at most all
    but its last token hit, in whole blocks."""
    cache = PrefixCachingKvCache(12, 16, stats=PrefixStats())
    owner = _request(0, 64, 1, 64)
    assert cache.admit(owner)
    owner.prefilled = 64
    reader = _request(1, 64, 1, 64)
    assert cache.admit(reader) and reader.prefilled == 48 and reader.in_prefill


def test_a_prefix_is_readable_once_computed_and_dropped_if_its_computer_is_not():
    cache = PrefixCachingKvCache(20, 16, stats=PrefixStats())
    owner, early = _request(0, 100, 5, 64), _request(1, 100, 5, 64)
    assert cache.admit(owner) and cache.admit(early)
    assert early.prefilled == 0 and early.shared_blocks == 0  # not computed yet
    cache.release(early)
    owner.prefilled = 32  # preempted half-way: its blocks of the prefix are lost
    cache.release(owner)
    assert 5 not in cache.prefixes and cache.free_blocks == 20


@pytest.mark.parametrize("header, row, fragments", [
    ("prefix_id,prefix_len", "0,10,3,x,5", ["not an integer", "line 2, prefix_id"]),
    ("prefix_id,prefix_len", "0,10,3,-1,5", ["prefix_id must be", ">= 0", "line 2"]),
    ("prefix_id,prefix_len", "0,10,3,1,11", ["prefix_len 11 is longer", "10 tokens",
                                             "line 2, prefix_len"]),
    ("prefix_id,prefix_len", "0,10,3,1,-2", ["prefix_len must be", "line 2"]),
    ("prefix_id,prefix_len", "0,10,3,1_0,5", ["not an integer", "prefix_id"]),
    ("prefix_id,prefix_len", "0,10,3,\u0663,5", ["not an integer", "prefix_id"]),
    ("prefix_id,prefix_len", "0,10,3,1,2.5", ["not an integer", "prefix_len"]),
    ("prefix_id,prefix_len", f"0,10,3,{2**63},5", ["prefix_id must be"]),
    ("prefix_id,prefix_len", "0,10,3,1,", ["not an integer", "prefix_len"]),
    ("prefix_id", "0,10,3,1", ["prefix_id without prefix_len", "prefix_len"]),
    ("prefix_len", "0,10,3,1", ["prefix_len without prefix_id", "prefix_id"]),
])
def test_bad_prefix_columns_give_one_clear_error(tmp_path, header, row, fragments):
    path = tmp_path / "bad.csv"
    path.write_text(f"arrival_s,prompt_tokens,output_tokens,{header}\n{row}\n")
    with pytest.raises(AccsimError) as caught:
        load_trace(str(path), need_tokens=True)
    message = caught.value.message()
    assert message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message, message


def test_prefix_columns_need_the_prompt_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("arrival_s,prefix_id,prefix_len\n0,1,5\n")
    with pytest.raises(AccsimError, match="prefix_len counts prompt tokens"):
        load_trace(str(path), need_tokens=False)


def test_missing_prefix_columns_are_no_prefix(tmp_path):
    read = load_trace(_trace(tmp_path, [(0, 10, 3)], prefix=False), need_tokens=True)
    assert read.prefix_ids is None and read.prefix_lens is None
    read = load_trace(_trace(tmp_path, [(0, 10, 3, 4, 10), (1, 12, 3, 4, 0)]),
                      need_tokens=True)
    assert read.prefix_ids.tolist() == [4, 4] and read.prefix_lens.tolist() == [10, 0]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prefix")
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    return str(folder / "config.json")


@pytest.mark.parametrize("args, fragment", [
    (["--prefix-hit-rate", "0.5"], "--prefix-hit-rate"),
    (["--batching", "static"], "continuous"),
    (["--disaggregate"], "disaggregated pools"),
])
def test_prefix_columns_and_a_contradicting_option_are_one_clear_error(
        tmp_path, model, capsys, args, fragment):
    path = _trace(tmp_path, [(0, 100, 3, 1, 64), (0.01, 100, 3, 1, 64)])
    assert main(["serve", "--model", model, "--arch", ARCH, "--arrival-trace", path,
                 "--no-cost-cache", *args]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accsim: error:"), lines
    assert path in lines[0] and "prefix_id, prefix_len" in lines[0], lines[0]
    assert fragment in lines[0], lines[0]


def test_serve_prints_and_writes_what_the_prefix_cache_saved(tmp_path, model, capsys):
    path = _trace(tmp_path, [(0.02 * i, 100, 3, 1, 64) for i in range(4)])
    out = tmp_path / "out.json"
    assert main(["serve", "--model", model, "--arch", ARCH, "--arrival-trace", path,
                 "--no-cost-cache", "--json", str(out)]) == 0
    cache = json.loads(out.read_text())["prefix_cache"]
    assert cache["hits"] == 3 and cache["tokens_saved"] == 3 * 64
    assert cache["token_hit_rate"] == pytest.approx(192 / 400)
    assert "prefix cache: 3 of 4 admissions hit, 192 of 400 prompt tokens not " \
           "prefilled (48.0%)" in capsys.readouterr().out
