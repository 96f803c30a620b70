"""Every option two or more verbs share, declared once: its flag, rule, help and the
verbs that take it (with what each says more). Parsers are built from here
(add_options), the Python API checks its arguments against the same rules
(simulator.options.arguments), and the flag table of docs/reference/conventions.md is
generated from it (simulator.options.table). An option one verb alone takes is declared
in that verb's command module.

One spelling per concept: an arrival trace is `--arrival-trace` everywhere
(plan-deployment's old `--trace` is read with a deprecation note), and `--trace` is
left to the timeline `run` writes."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from simulator.inputs.named_inputs import DEFAULT_ARCH, DEFAULT_WORKLOAD
from simulator.engines import ENGINE_CHOICES
from simulator.frontends.llm_choices import DTYPE, IMBALANCE, PHASE, SIZE, shipped_configs
from simulator.inputs.loader import shipped_names
from simulator.inputs.platform import COLLECTIVE_MODES
from simulator.mapping.heuristics import load_plugin
from simulator.mapping.plan import DEFAULT_ORIENTATION, FUSION_MODES, ORIENTATION_MODES
from simulator.options import declaration
from simulator.options.declaration import Option, Use
from simulator.options.rules import Integer, Name, OneOf, Real, Rule, Switch, Whole
from simulator.search.fusion import DEFAULT_FUSION
from simulator.system.overlap import OVERLAP_MODES
from simulator.system.parallelism import MAX_CHIPS

EXPORT_ARCH = "tpu_v5e_like"  # export's profiles are of a serving chip
# The verbs that simulate a workload as `run` does and take its inputs alike.
SIMULATING = ("run", "compare", "map", "regress", "sensitivity")
BATCHING = ("static", "dynamic", "continuous")
ARRIVALS = ("poisson", "gamma", "trace")
CHIP_COUNT = Whole(1, MAX_CHIPS)
# serve's model may run in any format of simulator.inputs.platform.Dtype (its spec checks which),
# where an LLM step's --dtype is a whole-byte format (simulator.frontends.llm_choices).
FORMAT = Name()
# --sla is KEY=MS,... text on the command line (simulator.serving.sla parses it) and a
# dict in serve's spec and the API (the spec checks it): no rule of its own.
SLA = Rule()
# --disaggregate is a switch on the command line (the pools come from --prefill-pool and
# --decode-pool) and a record of the pools in serve's spec and the API (the spec checks
# it, simulator.serving.pools.Disaggregation): no rule of its own there.
POOLS = Rule()
MAX_BATCH_AXIS = "16,64,256"  # plan-deployment's max batches: small, mid, continuous's


def _alike(verbs, **use) -> dict[str, Use]:
    return {verb: Use(**use) for verb in verbs}


def _arch_help() -> str:
    return (f"platform YAML, SCALE-Sim .cfg, or a shipped name "
            f"({', '.join(shipped_names('platform'))})")


def _platforms() -> str:
    return ", ".join(shipped_names("platform"))


def _serving(text: str) -> Callable[[], str]:
    """Help naming serve's limits (simulator.serving.spec), read when a serving verb's
    parser is built: the serving models are start-up the other verbs do not need."""
    def help_text() -> str:
        from simulator.serving import spec, arrival_trace as trace
        return text.format(MAX_RATE=spec.MAX_RATE, CV_LOW=spec.CV_RANGE[0],
                           CV_HIGH=spec.CV_RANGE[1], MAX_REQUESTS=spec.MAX_REQUESTS,
                           traces=", ".join(trace.shipped_traces()))
    return help_text


SYSTEM = "multi-chip system (the platform needs an interconnect table)"

DECLARED = (
    # --- inputs: what is simulated, and how it is mapped.
    Option("--arch", Name(), _arch_help, "inputs", row="--arch", spec=True, uses={
        **_alike(("run", "map", "regress", "sensitivity"), default=DEFAULT_ARCH,
                 help=lambda: f"{_arch_help()}; default {DEFAULT_ARCH}"),
        "compare": Use(repeat=True, required=True, note="repeat",
                       help=lambda: f"{_arch_help()}; repeat for each platform"),
        "check": Use(help=f"with a plan: check it on this platform (default "
                     f"{DEFAULT_ARCH}): per operator, each buffer's bytes needed and "
                     "available, slots, spills, and unknown operator names"),
        "serve": Use(help=lambda: f"platform YAML or shipped name ({_platforms()}); "
                     f"default {DEFAULT_ARCH}"),
        "plan-deployment": Use(repeat=True, required=True, note="repeat",
                               help="a platform to search (YAML or shipped name); "
                               "repeat for each"),
        "calibrate": Use(required=True, help="platform YAML or shipped name"),
        "export": Use(default=EXPORT_ARCH, help=lambda: "platform YAML or shipped name "
                      f"({_platforms()}); default {EXPORT_ARCH}")}),
    Option("--workload", Name(), lambda: "workload YAML, SCALE-Sim topology .csv, or a "
           f"shipped name ({', '.join(shipped_names('workload'))}); default "
           f"{DEFAULT_WORKLOAD}", "inputs", row="--workload", spec=True, uses={
               **_alike(SIMULATING),
               "check": Use(help="with a plan: check it on this workload (default "
                            f"{DEFAULT_WORKLOAD})"),
               "serve": Use(help="plain workload (one request = one inference): YAML "
                            f"or shipped name; default {DEFAULT_WORKLOAD}"),
               "export": Use(help="chakra only: a plain workload YAML or shipped name "
                             "instead of --model (one node per operator, one chip)"),
               "sweep report": Use(help="only this workload's points")}),
    Option("--model", Name(), lambda: "a Hugging Face config.json, or a shipped one "
           f"({', '.join(shipped_configs())}), instead of --workload; needs --phase",
           "inputs", metavar="CONFIG", row="--model", spec=True, uses={
               **_alike(SIMULATING),
               "serve": Use(help="LLM: Hugging Face config.json or shipped "
                            "model name; serves prefill and decode of every request"),
               "plan-deployment": Use(required=True, help="Hugging Face "
                                      "config.json or shipped model name"),
               "export": Use(help="LLM: Hugging Face config.json or shipped "
                             "model name (all formats)")}),
    Option("--onnx", Name(), "import MODEL.onnx as the workload (`accsim import onnx` "
           "with its defaults) and run it", "import", metavar="MODEL.onnx",
           exclusive="workload file", row="--onnx", uses=_alike(SIMULATING)),
    Option("--kineto", Name(), "import TRACE.json as the workload (`accsim import "
           "kineto` with its defaults) and run it", "import", metavar="TRACE.json",
           exclusive="workload file", row="--onnx", uses=_alike(SIMULATING)),
    Option("--mapping", Name(), lambda: "tiling plan YAML, or a shipped name "
           f"({', '.join(shipped_names('mapping'))}); default: every operator's best "
           "tiling, searched by the mapper (deterministic, once per distinct operator)",
           "inputs", row="--mapping", uses={
               **_alike(("run", "compare", "regress", "sensitivity")),
               "map": Use(help="plan whose fusions (and, for the heuristics, depth and "
                          "dataflow) apply; default: none"),
               "serve": Use(metavar="PLAN.yaml", dest="mapping_plan", help="a tiling "
                            "plan, as `accsim run --mapping` takes it: iteration "
                            "operators take its entries by operator name (those every "
                            "iteration has) and by layer_type")}),
    Option("--heuristic", Name(), "fill what the plan leaves open with this heuristic "
           "instead of the search (a built-in name or one a --plugin file registers)",
           "inputs", metavar="NAME", row="--heuristic", uses={
               **_alike(("run", "compare", "regress", "sensitivity")),
               "map": Use(repeat=True, note="repeat: the ones compared",
                          help="heuristic to compare (repeatable; a built-in name or "
                          "one a --plugin file registers); default: the built-in ones"),
               "serve": Use(help="iteration operators take this tiling heuristic's "
                            "tilings instead of the search's, as `accsim run "
                            "--heuristic`"),
               "plan-deployment": Use(help="iteration operators take this tiling "
                                      "heuristic's tilings, as `accsim serve "
                                      "--heuristic`"),
               "sweep run": Use(help="map every operator with this heuristic instead "
                                "of the default mapping's search (faster; part of each "
                                "point's key, so both kinds of result can share a "
                                "store)")}),
    Option("--fusion", OneOf(FUSION_MODES, "fusion mode"), "the fusion planner (DESIGN.md "
           "section 15): auto groups vector operators into their producer's epilogue as "
           "a compiler would; epilogue only what the plan's `fuse:` asks; none runs "
           "operator at a time (default: the plan's `fusion`, else "
           f"{DEFAULT_FUSION})", "inputs", row="--fusion", uses={
               **_alike(SIMULATING),
               "review": Use(help="the fusion planner's mode for every run and serving "
                             "point (default: each plan's `fusion`, else "
                             f"{DEFAULT_FUSION})"),
               "serve": Use(help="the fusion planner's mode for iteration costs, as "
                            f"`accsim run --fusion` (default {DEFAULT_FUSION})"),
               "plan-deployment": Use(help="the fusion planner's mode for iteration "
                                      "costs, as `accsim serve --fusion` (default "
                                      f"{DEFAULT_FUSION})"),
               "sweep run": Use(help="the fusion planner's mode for every point "
                                "(DESIGN.md section 15; default: "
                                f"{DEFAULT_FUSION}); part of each point's key")}),
    Option("--orientation", OneOf(ORIENTATION_MODES, "orientation"), "operand "
           "orientation of every GEMM and convolution (DESIGN.md section 19): auto lets "
           "the search weigh C = A.B and its transpose Bᵀ.Aᵀ, exchanging which operand "
           "the array holds stationary; normal or transposed fixes it (default: the "
           f"plan's `orientation`, else {DEFAULT_ORIENTATION})", "inputs",
           row="--orientation", uses=_alike(SIMULATING)),
    Option("--engine", OneOf(ENGINE_CHOICES, "engine"), "the engine: fast (a compiled "
           "kernel) or simpy (the discrete-event model), which give identical cycles; "
           "auto: fast", "inputs", default="auto", uses={
               **_alike(("run", "compare", "regress", "sensitivity", "review")),
               "calibrate": Use(default="fast")}),
    Option("--max-memory", Name(), "memory the tile programs may take, e.g. 8G or 512M "
           "(default: a quarter of RAM); with the fast engine a GEMM program longer than "
           "a block (a quarter of it) is generated and replayed block by block; a run "
           "needing more is refused before it starts, with a tiling that fits", "inputs",
           metavar="SIZE", uses=_alike(("run", "compare", "regress", "sensitivity",
                                        "calibrate"))),
    Option("--plugin", Name(), "a Python file of your own heuristics, executed once "
           "before anything else; its @simulator.mapping.register(NAME) functions become "
           "names a plan's `heuristic` may use (repeatable; the only way user code is "
           "loaded)", "inputs", metavar="FILE.py", default=[],
           parser_defaults={"load_plugin": load_plugin},
           uses=_alike(SIMULATING + ("check", "verify"), repeat=True)),
    Option("--precision", Name(), "a precision plan: per operator or layer_type, "
           "fallback chains of weight / activation / KV formats, sparsity and a "
           "guardrail on the emulated error; the chosen formats, every fallback and the "
           "emulated quality are printed and written to the JSON's precision block",
           "precision", metavar="PLAN.yaml", row="--precision", uses={
               **_alike(SIMULATING),
               "serve": Use(help="a precision plan, as `accsim run --precision` takes "
                            "it, applied to every iteration's operators before they are "
                            "costed; what it chose is written to the JSON's precision "
                            "block"),
               "plan-deployment": Use(repeat=True, note="repeat: each a candidate",
                                      help="a precision plan to search, as `accsim "
                                      "serve --precision` takes it; repeat for each. The "
                                      "model's own formats (none) are searched too "
                                      "unless --no-baseline")}),
    # --- an LLM step: phase, sizes, precision (simulator.frontends.llm_choices).
    Option("--phase", PHASE, "prefill (with --seq) or decode (with --context)", "llm",
           uses={**_alike(SIMULATING), "import hf": Use(required=True),
                 "export": Use(help="chakra: the iteration traced "
                               "(default prefill)")}),
    Option("--batch", SIZE, "sequences in the step (default 1)", "llm", uses={
        **_alike(SIMULATING + ("import hf",)),
        "export": Use(help="chakra: requests in the iteration (default 1)")}),
    Option("--seq", SIZE, "prefill: prompt tokens per sequence", "llm",
           uses=_alike(SIMULATING + ("import hf",))),
    Option("--context", SIZE, "decode: tokens in each sequence's KV cache", "llm",
           uses=_alike(SIMULATING + ("import hf",))),
    Option("--dtype", DTYPE, "activations (default: the platform's); a precision plan "
           "(run --precision) sets fallback chains per operator instead", "llm", uses={
               **_alike(SIMULATING + ("import hf",), aliases=("--act-dtype",)),
               "serve": Use(rule=FORMAT, help="LLM dtype (default: the model's)"),
               "plan-deployment": Use(rule=FORMAT, help="weights and activations "
                                      "(default: the model's)"),
               "export": Use(rule=FORMAT, help="LLM dtype (default: the platform's "
                             "first input dtype)")}),
    Option("--weight-dtype", DTYPE, "weights, e.g. int8 beside bf16 activations "
           "(default: --dtype)", "llm", uses=_alike(SIMULATING + ("import hf",))),
    Option("--kv-dtype", DTYPE, "the KV cache (default: --dtype)", "llm",
           uses=_alike(SIMULATING + ("import hf",))),
    Option("--imbalance", IMBALANCE, "MoE: busiest expert's tokens over the mean "
           "(default 1.0)", "llm", default=1.0, uses=_alike(SIMULATING + ("import hf",))),
    Option("--all-logits", Switch(), "prefill: lm_head on every token, not only the last",
           "llm", default=False, uses=_alike(SIMULATING + ("import hf",))),
    # --- a multi-chip system (simulator.system).
    Option("--chips", CHIP_COUNT, "chips N = T x P (default: T x P, which is 1 without "
           "--tp and --pp: one chip, unchanged)", "system", section=SYSTEM, uses={
               **_alike(("run", "compare")),
               "serve": Use(help="chips per replica, T x P (default); needs the "
                            "platform's interconnect table")}),
    Option("--tp", CHIP_COUNT, "tensor parallelism T (Megatron for --model; "
           "column-parallel GEMM/conv otherwise, row-parallel for the GEMMs a plan's "
           "row_parallel names)", "system", section=SYSTEM, default=1, uses={
               **_alike(("run", "compare")),
               "serve": Use(default=None, help="tensor parallelism per replica "
                            "(default 1)"),
               "export": Use(listed=True, metavar="T,...", default="1", help="tensor "
                             "parallelism: each profile is one chip's of T; vidur and "
                             "llmservingsim take a list, e.g. 1,2,4,8 (default 1; T > 1 "
                             "needs the platform's interconnect table)")}),
    Option("--pp", CHIP_COUNT, "pipeline parallelism P: contiguous stages of layers",
           "system", section=SYSTEM, default=1, uses={
               **_alike(("run", "compare")),
               "serve": Use(default=None, help="pipeline stages per replica (default "
                            "1)")}),
    Option("--ep", CHIP_COUNT, "expert parallelism E (MoE models): divides experts and N",
           "system", section=SYSTEM, default=1, uses={
               **_alike(("run", "compare")),
               "serve": Use(default=None, help="expert parallelism per replica "
                            "(default 1)")}),
    Option("--overlap", OneOf(OVERLAP_MODES, "overlap mode"), "collectives overlap "
           "compute: none (default: they serialise), independent (with compute that "
           "does not read them) or decomposed (also all-gathers / reduce-scatters split "
           "into ring steps under the GEMM they feed or follow)", "system",
           section=SYSTEM, default="none", uses={
               **_alike(("run", "compare")),
               "serve": Use(default=None, help="collectives overlap compute in each "
                            "iteration, as `accsim run --overlap` (default none)")}),
    Option("--collectives", OneOf(COLLECTIVE_MODES, "collectives mode"), "how "
           "collectives run (DESIGN.md section 22): auto (the platform's default unless it "
           "pins one: the cheapest algorithm per wiring dimension for the message size), "
           "ring (the flat ring of section 14), or one algorithm wherever it applies",
           "collectives", section=SYSTEM,
           uses=_alike(("run", "compare", "serve", "plan-deployment"))),
    Option("--mesh", Name(), "the shape of the tensor-parallel group on the wiring's "
           "dimensions, inner first (e.g. 4x4; default: the squarest that fits; "
           "A x B = T)", "collectives", section=SYSTEM, metavar="AxB",
           uses=_alike(("run", "compare"))),
    Option("--ignore-capacity", Switch(), "run even where a chip cannot hold its weights "
           "+ KV cache + activations (offchip.capacity_bytes): a deliberate what-if, "
           "stamped on the result", "capacity", default=False,
           uses=_alike(("run", "compare", "regress", "review", "serve", "sweep run",
                        "export"))),
    # --- power (DESIGN.md section 20): a cap on each chip, which lowers its clock.
    Option("--power-cap-w", Real(), "cap each chip's power at W watts: the clock falls to "
           "the highest point of the platform's DVFS table (dvfs.points) whose power at "
           "the run's utilisation fits, and every figure follows it (default: the "
           "platform's dvfs.power_cap_w, if any)", "power", metavar="W",
           uses=_alike(("run", "serve", "plan-deployment"))),
    # --- serving load (simulator.serving.spec holds the ranges: serve and
    # plan-deployment check their values there).
    Option("--arrival", OneOf(ARRIVALS, "arrival process"), "default poisson (trace when "
           "--arrival-trace is given)", "serving", uses=_alike(("serve",
                                                                 "plan-deployment"))),
    Option("--rate", Real(), _serving("requests/s, at most {MAX_RATE:g} (with a trace: "
                                      "scale it to this rate)"), "serving", uses={
               "serve": Use(), "plan-deployment": Use(help="requests/s where the rate "
                                                      "search starts")}),
    Option("--cv", Real(), _serving("gamma: coefficient of variation of the gaps, "
                                    "{CV_LOW:g} to {CV_HIGH:g} (default 1)"), "serving",
           uses=_alike(("serve", "plan-deployment"))),
    Option("--arrival-trace", Name(), _serving(
        "CSV of arrival times (s) and, for LLMs, prompt and output tokens; shipped: "
        "{traces}"), "serving",
           metavar="FILE|NAME", uses={
               "serve": Use(), "plan-deployment": Use(deprecated=("--trace",))}),
    Option("--prompt-tokens", Integer(), "poisson/gamma LLM prompt length (default 512)",
           "serving", uses=_alike(("serve", "plan-deployment"))),
    Option("--output-tokens", Integer(), "poisson/gamma LLM output length (default 128)",
           "serving", uses=_alike(("serve", "plan-deployment"))),
    Option("--requests", Integer(), _serving("requests to serve, at most "
                                             "{MAX_REQUESTS:,} (default 1000; a trace: "
                                             "all)"), "serving", uses={
               "serve": Use(), "plan-deployment": Use(help="requests per run (default "
                                                      "1000; a trace: all)")}),
    Option("--seed", Integer(), "default 0; same seed, same result", "serving",
           uses=_alike(("serve", "plan-deployment"))),
    Option("--max-tokens", Integer(), "continuous: tokens per iteration, the chunked "
           "prefill budget (default 512)", "serving", uses={
               **_alike(("serve", "plan-deployment")),
               "export": Use(help="largest num_tokens, prefill chunk and (vidur) KV "
                             "cache (vidur default 4096, llmservingsim 2048)")}),
    Option("--bucket-bits", Integer(), "LLM iteration costs simulated at sizes of this many "
           "significant bits and interpolated between them (default 3: grid points at "
           "most 25% apart)", "serving", uses=_alike(("serve", "plan-deployment"))),
    Option("--batching", OneOf(BATCHING, "batching policy"), "default: continuous for "
           "--model, dynamic for --workload", "serving", uses={
               "serve": Use(), "plan-deployment": Use(
                   metavar="POLICY,...", default="continuous", listed=True, help="the "
                   "policies searched, comma-separated: static, dynamic, continuous "
                   "(default continuous)")}),
    Option("--max-batch", Integer(), "requests per batch (default 8; continuous 256)",
           "serving", uses={
               "serve": Use(),
               "plan-deployment": Use(metavar="N,...", listed=True, default=MAX_BATCH_AXIS,
                                      help="the largest batches searched (default "
                                      f"{MAX_BATCH_AXIS})"),
               "export": Use(help="largest decode batch (vidur default 128, "
                             "llmservingsim 512)")}),
    Option("--replicas", Integer(), "default 1", "serving", uses={
        "serve": Use(),
        "plan-deployment": Use(metavar="N,...", listed=True, help="the replica counts "
                               "searched (default: powers of 2 up to the budget)")}),
    Option("--sla", SLA, "targets such as ttft_p99_ms=500,tpot_p99_ms=50,"
           "latency_p99_ms=20", "serving", metavar="KEY=MS,...", uses={
               "serve": Use(), "plan-deployment": Use(required=True)}),
    # --- where the KV cache is and moves: disaggregated pools (simulator.serving.pools),
    # the prefix cache, the host tier (DESIGN.md section 20).
    Option("--disaggregate", Switch(), "split prefill and decode into pools, the KV "
           "cache moved between them", "kv", default=None, uses={
               "serve": Use(rule=POOLS, help="serve on a prefill pool and a decode "
                            "pool (sized by --prefill-pool and --decode-pool), each "
                            "request's KV moved between them over --kv-link before its "
                            "first decode iteration; TTFT includes the move"),
               "plan-deployment": Use(help="search disaggregated deployments beside the "
                                      "co-located ones: each T x P split with its "
                                      "replicas divided between a prefill and a decode "
                                      "pool; the result says which wins and why")}),
    Option("--prefix-hit-rate", Real(), "share of each prompt's tokens found in the "
           "prefix cache (0 to 1, as vLLM's prefix-cache hit rate counts them): their "
           "prefill is skipped, their KV read as cached context; continuous batching",
           "kv", uses=_alike(("serve", "plan-deployment"))),
    Option("--kv-host-tier", Switch(), "a preempted request's KV goes out to host "
           "memory and comes back over runtime.host_link (latency + bytes / bandwidth "
           "each way, the replica waiting) instead of being recomputed", "kv",
           default=None, uses=_alike(("serve", "plan-deployment"))),
    Option("--kv-link", OneOf(("interconnect", "host"), "KV link"), "what a "
           "disaggregated request's KV crosses: interconnect (the chips' links, point to "
           "point; default) or host (runtime.host_link, out to host memory and back)",
           "kv", uses=_alike(("serve", "plan-deployment"))),
    # --- where the work runs (simulator.sweep.executors.executor_for checks them).
    Option("--scheduler", Name(), "serial, processes (a local process pool), dask-local "
           "(a local Dask cluster), or dask://HOST:PORT (a running Dask scheduler); "
           "default processes: a local process pool", "executor", default="processes",
           uses={"sweep run": Use(),
                 "review": Use(help="where the points of the study's sweep (scope.sweep) "
                               "run: serial, processes (a local process pool), dask-local "
                               "(a local Dask cluster), or dask://HOST:PORT (a running "
                               "Dask scheduler); default processes: a local process "
                               "pool"),
                 "plan-deployment": Use(help="where the points sharing a plan are "
                                        "searched: serial, processes (a local process "
                                        "pool), dask-local (a local Dask cluster), or "
                                        "dask://HOST:PORT (a running Dask scheduler); "
                                        "default processes: a local process pool")}),
    Option("--workers", Whole(1), "processes or local Dask workers (default: the CPUs "
           "available)", "executor", uses={
               **_alike(("review", "sweep run", "plan-deployment")),
               "map": Use(help="processes (default: the CPUs available)")}),
    Option("--store", Name(), "SQLite store the points are kept in (a sweep store): a "
           "rerun resumes, computing only points it lacks", "store", metavar="FILE", uses={
               "sweep run": Use(required=True, metavar="FILE.sqlite", help="result "
                                "store; created if absent, resumed if not"),
               "plan-deployment": Use(help="SQLite store the points are kept in (a sweep "
                                      "store): a rerun resumes, computing only points it "
                                      "lacks; iteration costs are cached in the folder "
                                      "<store stem>-costs beside it")}),
    # --- outputs: what each verb writes there is its own, the flag's meaning is not.
    Option("--json", Name(), "write the result as JSON", "outputs", metavar="PATH",
           row="--json", uses={
               "run": Use(help="write the full result as JSON"),
               "compare": Use(help="write every platform's full result (as `run --json` "
                              "writes it) in one JSON file"),
               "map": Use(help="write the mapper result as JSON"),
               "regress": Use(help="write this run's full result as JSON, as `accsim run "
                              "--json` writes it"),
               "sensitivity": Use(help="write the tornado as JSON ('-': print it instead "
                                  "of the table)"),
               "serve": Use(help="write the result (and manifest) as JSON"),
               "plan-deployment": Use(help="write every point, pruned point, best and "
                                      "front"),
               "calibrate": Use(help="write the fit as JSON ('-': print it instead of "
                                "the table)")}),
    Option("--csv", Name(), "write the rows as CSV", "outputs", metavar="PATH",
           row="--csv", uses={
               "run": Use(help="write one row per operator as CSV"),
               "compare": Use(help="write one row per platform (ratios as fractions, "
                              "x_*: ratio to the first platform)"),
               "map": Use(help="write one row per operator: the table's columns, the "
                          "best's energy, each heuristic's cycles, energy and gap "
                          "(percent, as the table)"),
               "regress": Use(help="write this run's operators as CSV, as `accsim run "
                              "--csv` writes them"),
               "sensitivity": Use(help="write the table as CSV, one row per field "
                                  "(swing_fraction: the table's swing % as a fraction)"),
               "serve": Use(help="with --sweep-rate: write the curve as CSV"),
               "plan-deployment": Use(help="write one row per point (pruned ones "
                                      "included)"),
               "sweep report": Use(help="write every row as CSV")}),
    Option("--plot", Name(), "write a figure (.png, .svg or .pdf)", "outputs",
           metavar="PATH", row="--plot", uses={
               "run": Use(help="write a PNG of cycles by layer_type"),
               "compare": Use(help="write a PNG/SVG/PDF of each platform's cycles by "
                              "term"),
               "map": Use(help="write a PNG/SVG/PDF of each operator's best tiling "
                          "against the heuristics' (by the objective, log axis)"),
               "regress": Use(help="write a PNG of this run's cycles by layer_type, as "
                              "`accsim run --plot`"),
               "sensitivity": Use(help="write the tornado figure (.png, .pdf or .svg)"),
               "serve": Use(help="PNG: latency CDFs, or the curve with --sweep-rate"),
               "plan-deployment": Use(help="figure: SLA capacity vs chips per platform, "
                                      "the Pareto front ringed (.png, .svg or .pdf)"),
               "sweep report": Use(help="scatter of the first two objectives with the "
                                   "front highlighted (.png, .svg, .pdf)")}),
    Option("--output", Name(), "write the workload YAML here (default: standard output)",
           "outputs", short="-o", metavar="PATH", uses={
               **_alike(("import hf", "import onnx", "import kineto")),
               "calibrate": Use(required=True, help="the calibrated platform YAML"),
               "export": Use(required=True, metavar="FOLDER", help="folder to write "
                             "(new, empty, or one an earlier export wrote: its tables "
                             "are merged, not replaced)")}),
    Option("--wide", Switch(), "print each table in one piece, however wide (default: a "
           "table wider than the terminal, or than COLUMNS where set, is printed as "
           "several, each repeating its key columns; a pipe or file without COLUMNS gets "
           "whole tables)", "table", default=False, row="--wide",
           uses=_alike(SIMULATING[:3] + ("sensitivity", "check", "serve", "sweep report",
                                         "plan-deployment", "calibrate"))),
    Option("--strict", Switch(), "fail on any op that is not supported instead of "
           "listing it", "import", default=False,
           uses=_alike(("import onnx", "import kineto"))),
)

OPTIONS: Mapping[str, Option] = {option.flag: option for option in DECLARED}


def add_options(parser: argparse.ArgumentParser, verb: str, *groups: str) -> None:
    """Every declared option of `groups` that `verb` takes (declaration.add_options)."""
    declaration.add_options(parser, verb, *groups, options=OPTIONS)
