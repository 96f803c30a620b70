"""The compiled serving loop against the SimPy loop on whole runs (issue 44, speed):
each case is served by `serve` (the figures `accsim serve --json` prints) through the
SimPy loop, then the compiled loop, SimPy and the compiled loop again (memos warm for
the timings; the compiled loop's best of two, its kernel loaded from Numba's cache), in
one process and one cost cache; the results' JSON must be the same text, and the CPU
seconds of each warm run are printed. The first SimPy run fills the cost cache (cold:
minutes per T x P split); later runs read it.

Run: `python experiments/compiled_loop_identity.py [--case NAME ...] [--cost-cache DIR]`.
"""

from __future__ import annotations

import argparse
import functools
import json
import time

from simulator.serving import engine, serve as serving
from simulator.serving.cost_cache import CostCache
from simulator.serving.spec import ServeSpec

LLAMA = dict(arch="tpu_v5e_like", model="llama_3_1_8b")
TRACE = dict(arrival="trace", arrival_trace="splitwise_conv")
CASES = {
    "trace b32 whole": LLAMA | TRACE | dict(max_batch=32),
    "trace b256 rate 3 1k": LLAMA | TRACE | dict(rate=3, max_batch=256, requests=1000),
    "round robin x2 b64": LLAMA | TRACE | dict(rate=4, requests=2000, max_batch=64,
                                              replicas=2),
    "tp2 b256 8.72/s 2k": LLAMA | TRACE | dict(rate=8.72, requests=2000, max_batch=256,
                                               chips=2, tp=2),
    "preemptions": LLAMA | dict(rate=4, requests=400, prompt_tokens=2048,
                                output_tokens=600, max_batch=64, arrival="gamma", cv=2,
                                seed=3),
    # pipelined replicas (P > 1 stages, their micro-batches through the stages)
    "pp2 b64 4/s 2k": LLAMA | TRACE | dict(rate=4, requests=2000, max_batch=64, chips=2,
                                           pp=2),
    "pp4 b256 8/s 2k": LLAMA | TRACE | dict(rate=8, requests=2000, max_batch=256,
                                            chips=4, pp=4),
    "tp2 pp2 x2 b16": LLAMA | TRACE | dict(rate=6, requests=2000, max_batch=16, chips=4,
                                           tp=2, pp=2, replicas=2),
    "pp2 mb3 preemptions": LLAMA | dict(rate=6, requests=400, prompt_tokens=4096,
                                        output_tokens=1200, max_batch=64, chips=2, pp=2,
                                        micro_batches=3, arrival="gamma", cv=2, seed=3),
}


def timed(setup, spec, *, compiled: bool) -> tuple[str, float]:
    """The result's JSON text and the CPU seconds of the run."""
    serving.run_serving = functools.partial(engine.run_serving, compiled=compiled)
    start = time.process_time()
    result, _ = serving.serve(setup, spec)
    used = time.process_time() - start
    return json.dumps(result, sort_keys=True), used


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--cost-cache", metavar="DIR")
    args = parser.parse_args()
    failed = 0
    print(f"{'case':22s}{'SimPy CPU s':>12s}{'compiled':>10s}{'ratio':>7s}  identical")
    for name in args.case or CASES:
        spec = ServeSpec(**CASES[name]).resolved()
        setup = serving.prepare(spec, cost_cache=CostCache(args.cost_cache))
        reference, _ = timed(setup, spec, compiled=False)  # cold costs filled here
        compiled, fast = timed(setup, spec, compiled=True)
        again, slow = timed(setup, spec, compiled=False)
        once_more, faster = timed(setup, spec, compiled=True)  # (the kernel loaded)
        fast = min(fast, faster)
        same = compiled == reference == again == once_more
        failed += not same
        print(f"{name:22s}{slow:12.3f}{fast:10.3f}{slow / fast:7.1f}  "
              f"{'yes' if same else 'NO'}", flush=True)
    serving.run_serving = engine.run_serving
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
