"""Disaggregated serving and the prefix cache (DESIGN.md section 20): the KV bytes
moved equal the prompts' KV cache, TTFT ends when the KV has arrived, the move costs
what the link's model says, disaggregation wins where long prompts' prefill chunks
break a tight TPOT on co-located replicas and loses where short prompts leave the
split chips idle, the search holds both and says which wins, a prefix hit skips its
prefill, and bad options get one clear error. A tiny Llama config keeps runs fast."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from serving_helpers import LinearTokenCost, run
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.collectives.cost import collective_cost
from simulator.errors import AccsimError
from simulator.inputs.named_inputs import load_inputs
from simulator.serving.cost_cache import CostCache
from simulator.serving.curves import find_max_rate
from simulator.serving.kv_cache import HostTier
from simulator.serving.serve import Setup, kv_link, prepare, simulate_serving
from simulator.serving.spec import ServeSpec

ARCH = "tpu_v5e_like"
# KV bytes per token from the usual formula (2 (K and V) x layers x KV heads x head dim x
# bytes per element), for the tiny model in bf16.
HEAD_DIM = TINY_LLAMA["hidden_size"] // TINY_LLAMA["num_attention_heads"]
KV_BYTES_PER_TOKEN = (2 * TINY_LLAMA["num_hidden_layers"]
                      * TINY_LLAMA["num_key_value_heads"] * HEAD_DIM * 2)
# Prompt, output tokens and whether the request moves its KV (one output token: it is
# produced by the prefill and nothing is left to decode).
TRACE = [(0.0, 900, 40), (0.0001, 1, 7), (0.0002, 2500, 1), (0.0004, 64, 300),
         (0.0004, 3000, 12), (0.001, 17, 2), (0.0012, 1200, 1), (0.002, 700, 90)]
PAIR = {"prefill": {"replicas": 1}, "decode": {"replicas": 1}}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("disaggregated")
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    (folder / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(
        f"{t},{p},{o}\n" for t, p, o in TRACE))
    base = load_inputs(ARCH, "gemm_4096", None).platform.model_dump(mode="json")
    hosted = dict(base, name="hosted", runtime=dict(
        base.get("runtime") or {}, host_link={"bandwidth_gbps": 32.0, "latency_us": 5.0}))
    (folder / "hosted.yaml").write_text(json.dumps(hosted))
    return {"model": str(folder / "config.json"), "trace": str(folder / "trace.csv"),
            "hosted": str(folder / "hosted.yaml"), "folder": folder,
            "cache": CostCache(folder / "costs")}


def _spec(files, **fields) -> ServeSpec:
    return ServeSpec(model=files["model"], arch=ARCH, **fields)


def test_kv_bytes_moved_equal_the_kv_cache_of_the_prompts_moved(files, capsys):
    out = files["folder"] / "moved.json"
    assert main(["serve", "--model", files["model"], "--arch", ARCH, "--arrival-trace",
                 files["trace"], "--disaggregate", "--prefill-pool", "replicas=2",
                 "--decode-pool", "replicas=1,max_batch=4", "--cost-cache",
                 str(files["folder"] / "costs"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    moved = [p for _, p, o in TRACE if o > 1]
    transfer = result["disaggregated"]["kv_transfer"]
    assert transfer["kv_bytes_per_token"] == KV_BYTES_PER_TOKEN
    assert transfer["requests"] == len(moved)
    assert transfer["bytes"] == sum(moved) * KV_BYTES_PER_TOKEN
    assert result["completed"] == len(TRACE) and result["dropped"] == 0
    assert result["disaggregated"]["prefill"]["chips"] == 2
    assert result["disaggregated"]["decode"]["max_batch"] == 4
    assert f"{sum(moved) * KV_BYTES_PER_TOKEN:,} bytes" in printed
    assert "prefill pool 2 x (T1 x P1)" in printed


def test_the_published_kv_size_of_llama_3_1_8b_is_what_moves(files):
    """128 KiB a token in bf16 (shared/reference/llm-serving.md)."""
    spec = ServeSpec(model="llama_3_1_8b", arch=ARCH, rate=1, disaggregate=PAIR)
    setup = prepare(spec, cost_cache=files["cache"])
    assert kv_link(setup, spec.resolved()).kv_bytes_per_token == 128 * 1024


def test_ttft_ends_when_the_kv_has_arrived_at_the_links_cost(files):
    spec = _spec(files, arrival_trace=files["trace"], disaggregate=PAIR).resolved()
    setup = prepare(spec, cost_cache=files["cache"])
    store, _ = simulate_serving(setup, spec)
    moves = store.moves
    assert set(moves.arrived_s) == {i for i, (_, _, o) in enumerate(TRACE) if o > 1}
    for request in store.finished:
        if request.id not in moves.arrived_s:  # one output token: TTFT is the prefill's
            assert request.first_token_s == request.finish_s
            continue
        share = TRACE[request.id][1] * KV_BYTES_PER_TOKEN
        seconds = collective_cost("point_to_point", share, 2, setup.platform).time_s
        assert request.first_token_s == moves.arrived_s[request.id]
        assert moves.arrived_s[request.id] == pytest.approx(
            moves.started_s[request.id] + seconds, rel=1e-12)
        assert moves.started_s[request.id] >= moves.prefilled_s[request.id]
        assert request.finish_s > request.first_token_s


def test_a_move_over_the_host_link_goes_out_and_back_in(files):
    spec = ServeSpec(model=files["model"], arch=files["hosted"], rate=1,
                     disaggregate={**PAIR, "kv_link": "host"}).resolved()
    setup = prepare(spec, cost_cache=files["cache"])
    nbytes, seconds, held, energy = kv_link(setup, spec).move(1000)
    one_way = 5e-6 + 1000 * KV_BYTES_PER_TOKEN / 32e9
    assert nbytes == 1000 * KV_BYTES_PER_TOKEN
    assert seconds == pytest.approx(2 * one_way, rel=1e-12)
    assert held == pytest.approx(seconds - 2 * 5e-6, rel=1e-12)


def capacities(files, prompt: int, output: int, sla: dict) -> dict[str, float]:
    """SLA capacity (requests/s) of two chips co-located (2 replicas) and
    disaggregated (1 prefill + 1 decode replica), on the same requests."""
    found = {}
    for name, deployment in (("co-located", {"replicas": 2}),
                             ("disaggregated", {"disaggregate": PAIR})):
        spec = _spec(files, prompt_tokens=prompt, output_tokens=output, requests=600,
                     sla=sla, find_max_rate=True, **deployment)
        found[name] = find_max_rate(prepare(spec, cost_cache=files["cache"]),
                                    spec)["max_rate_rps"]
    return found


def _costs_ms(files, prompt: int) -> dict[str, float]:
    spec = _spec(files, prompt_tokens=prompt, output_tokens=2, rate=1).resolved()
    cost = prepare(spec, cost_cache=files["cache"]).cost
    chunk = min(prompt, spec.max_tokens)
    return {"decode": cost.iteration((), [prompt]).seconds * 1e3,
            "chunk": cost.iteration([(chunk, 0)], [prompt]).seconds * 1e3,
            "prefill": cost.iteration([(chunk, 0)], ()).seconds * 1e3 * -(-prompt // chunk)}


def test_disaggregation_wins_with_long_prompts_and_a_tight_tpot(files):
    """A TPOT target below an iteration that carries a prefill chunk: co-located
    replicas mix long prompts' chunks into their decode iterations, the decode pool
    never does."""
    prompt, output = 3000, 16
    ms = _costs_ms(files, prompt)
    tpot = 1.8 * ms["decode"]
    assert ms["chunk"] > tpot  # a chunk in an iteration breaks the target
    found = capacities(files, prompt, output,
                       {"tpot_p99_ms": tpot, "ttft_p99_ms": 8 * ms["prefill"]})
    assert found["disaggregated"] > 2 * found["co-located"], found


def test_disaggregation_loses_with_short_prompts_and_a_loose_sla(files):
    """Short prompts leave the prefill chip nearly idle: a chunk costs an iteration
    little, so two co-located replicas share the decode batch while the disaggregated
    pair's one decode chip carries it alone, and its TPOT binds first. Loose on TTFT (a
    few hundred prefills: a co-located prompt waits behind decode iterations); a decode
    batch's attention is one launch, so a decode chip's iteration grows slowly with its
    batch and the TPOT target must sit near one iteration for the split to show."""
    prompt, output = 64, 64
    ms = _costs_ms(files, prompt)
    found = capacities(files, prompt, output, {"tpot_p99_ms": 1.5 * ms["decode"],
                                               "ttft_p99_ms": 400 * ms["prefill"]})
    assert found["co-located"] > 1.5 * found["disaggregated"], found


@pytest.mark.parametrize("args, fragment", [
    (["--disaggregate", "--prefill-pool", "replicas=x"],
     "--prefill-pool: replicas must be a whole number"),
    (["--disaggregate", "--decode-pool", "chips=2"], "--decode-pool: expected KEY=VALUE"),
    (["--prefill-pool", "replicas=2"], "--prefill-pool: pools and the KV link shape"),
    (["--disaggregate", "--replicas", "2"], "--replicas: with disaggregate each pool"),
    (["--disaggregate", "--batching", "static"], "disaggregated pools batch continuously"),
    (["--disaggregate", "--prefill-pool", "replicas=0"], "greater than or equal to 1"),
    (["--disaggregate", "--kv-link", "host"], "runtime.host_link"),
])
def test_bad_pool_options_get_one_clear_error(files, capsys, args, fragment):
    assert main(["serve", "--model", files["model"], "--arch", ARCH, "--rate", "1",
                 "--requests", "4", "--no-cost-cache", *args]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accsim: error:"), captured.err
    assert fragment in lines[0], lines[0]
    assert "Per request" not in captured.out


def test_a_platform_without_links_is_refused_naming_the_interconnect(files, capsys):
    assert main(["serve", "--model", files["model"], "--arch", "tpu_v1", "--rate", "1",
                 "--requests", "4", "--no-cost-cache", "--disaggregate"]) == 1
    line = capsys.readouterr().err.strip()
    assert "interconnect" in line and "tpu_v1" in line, line


def test_the_search_holds_both_kinds_and_says_disaggregation_wins(files, capsys):
    """plan-deployment --disaggregate on long prompts and a tight TPOT: co-located and
    disaggregated points side by side, the disaggregated one's SLA capacity that of
    `serve --disaggregate --find-max-rate` with its flags, and the verdict naming it
    the winner and the TPOT that binds the co-located best."""
    prompt, output = 3000, 16
    ms = _costs_ms(files, prompt)
    sla = f"tpot_p99_ms={1.8 * ms['decode']!r},ttft_p99_ms={8 * ms['prefill']!r}"
    workload = ["--model", files["model"], "--prompt-tokens", str(prompt),
                "--output-tokens", str(output), "--requests", "600", "--sla", sla]
    out = files["folder"] / "plan.json"
    assert main(["plan-deployment", "--arch", ARCH, *workload, "--budget-chips", "2",
                 "--chips-per-replica", "1", "--replicas", "1", "--max-batch", "64",
                 "--disaggregate", "--scheduler", "serial", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    kinds = {row.get("prefill_replicas"): row for row in result["points"]}
    assert set(kinds) == {None, 1} and kinds[1]["chips"] == 2 and kinds[None]["chips"] == 1
    pooled = kinds[1]
    served = files["folder"] / "served.json"
    assert main(["serve", "--arch", ARCH, *workload, "--find-max-rate", "--disaggregate",
                 "--prefill-pool", "replicas=1", "--decode-pool", "replicas=1",
                 "--max-batch", "64", "--json", str(served)]) == 0
    assert pooled["sla_rate_rps"] == json.loads(served.read_text())["max_rate_rps"]
    found = result["disaggregation"][ARCH]
    assert found["winner"] == "disaggregated" and found["disaggregated"] == pooled["key"]
    assert "bound by TPOT p99" in found["text"]
    assert "disaggregated vs co-located:" in printed and found["text"] in printed


def test_a_prefix_cache_hit_skips_the_prefix_prefill(files):
    """One request alone, a linear cost per computed token: with 75% of its 1,000
    prompt tokens cached it prefills 250 tokens in one iteration, read beside 750 of
    cached context; without, 1,000 in two chunks of the 512-token budget."""
    class Chunks(LinearTokenCost):
        def __init__(self):
            super().__init__()
            self.prefills = []

        def iteration(self, prefill, decode):
            self.prefills += list(prefill)
            return super().iteration(prefill, decode)

    ttft = {}
    for rate in (None, 0.75):
        cost = Chunks()
        spec = ServeSpec(model="m", rate=1, requests=1, prompt_tokens=1000,
                         output_tokens=3, prefix_hit_rate=rate)
        _, _, times = run(spec, cost, kv_blocks=1000)
        ttft[rate] = float(times.ttft_s[0])
        assert cost.prefills == ([(512, 0), (488, 512)] if rate is None else [(250, 750)])
    assert ttft[0.75] == pytest.approx(1e-3 + 250 * 1e-5, rel=1e-12)
    assert ttft[None] == pytest.approx(2e-3 + 1000 * 1e-5, rel=1e-12)


def test_a_prefix_hit_rate_needs_continuous_batching(files, capsys):
    assert main(["serve", "--model", files["model"], "--arch", ARCH, "--rate", "1",
                 "--requests", "4", "--no-cost-cache", "--batching", "static",
                 "--prefix-hit-rate", "0.5"]) == 1
    line = capsys.readouterr().err.strip()
    assert "--prefix-hit-rate" in line and "continuous" in line, line


class Counted(LinearTokenCost):
    """LinearTokenCost that keeps every iteration's seconds and prefill chunks."""

    def __init__(self):
        super().__init__()
        self.seconds, self.prefilled = 0.0, 0

    def iteration(self, prefill, decode):
        cost = super().iteration(prefill, decode)
        self.seconds += cost.seconds
        self.prefilled += sum(new for new, _ in prefill)
        return cost


class Tier(HostTier):
    """A host tier that keeps each move's tokens."""

    def seconds(self, tokens: int) -> float:
        object.__setattr__(self, "moved", getattr(self, "moved", []) + [tokens])
        return super().seconds(tokens)


def test_a_host_tier_swaps_instead_of_recomputing_at_the_links_cost(tmp_path):
    """Eight requests at once on a cache that cannot hold their outputs: without a
    host tier the preempted are recomputed (more prefill than the prompts); with one,
    each preempted request's KV goes out and comes back once (the same tokens), no
    prompt is prefilled twice, and the replica's busy time is its iterations' plus
    the moves' (latency + bytes / bandwidth each way)."""
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                    + "0,64,200\n" * 8)
    spec = ServeSpec(model="m", arrival_trace=str(tmp_path / "t.csv"), max_batch=8)
    recomputed = Counted()
    store, _, _ = run(spec, recomputed, kv_blocks=40)
    assert store.preemptions > 0 and recomputed.prefilled > 8 * 64
    cost, tier = Counted(), Tier(5e-6, 32e9, 4096)
    setup = Setup(spec.model_copy(update={"kv_host_tier": True}), None, None, cost, 40,
                  None, host_tier=tier)
    swapped, _ = simulate_serving(setup, setup.spec)
    assert len(swapped.finished) == 8
    assert swapped.swaps > 0 and swapped.preemptions == 0
    assert cost.prefilled == 8 * 64
    assert len(tier.moved) == 2 * swapped.swaps  # each out, then back in
    assert all(count % 2 == 0 for count in Counter(tier.moved).values())
    moves = sum(5e-6 + tokens * 4096 / 32e9 for tokens in tier.moved)
    assert sum(swapped.busy_s) == pytest.approx(cost.seconds + moves, rel=1e-12)


def test_a_shipped_platform_carries_the_kv_host_tier_at_its_cited_link(files):
    """whatif/tpu_v5e_host: 15 GB/s per chip ("How to Scale Your Model"), 5 us a
    transfer (assumed); tpu_v5e_like has no host link and refuses the tier."""
    spec = ServeSpec(model=files["model"], arch="whatif/tpu_v5e_host", rate=1,
                     requests=4, kv_host_tier=True)
    tier = prepare(spec, cost_cache=files["cache"]).host_tier
    assert tier.latency_s == 5.0 * 1e-6 and tier.bandwidth_bytes_s == 15e9  # us, GB/s
    with pytest.raises(AccsimError, match="runtime.host_link"):
        prepare(spec.model_copy(update={"arch": ARCH}), cost_cache=files["cache"])


@pytest.mark.parametrize("args, fragment", [
    (["--kv-link", "host"], "--kv-link: --kv-link is what disaggregated points' KV"),
    (["--disaggregate", "--batching", "static"], "--disaggregate: disaggregated pools"),
    (["--kv-host-tier"], "runtime.host_link"),
])
def test_bad_search_options_get_one_clear_error(files, capsys, args, fragment):
    assert main(["plan-deployment", "--arch", ARCH, "--model", files["model"],
                 "--prompt-tokens", "64", "--output-tokens", "8", "--requests", "8",
                 "--sla", "tpot_p99_ms=50", "--budget-chips", "1", "--max-batch", "4",
                 "--scheduler", "serial", *args]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accsim: error:"), lines
    assert fragment in lines[0], lines[0]
