"""Byte-identity net for `accsim serve`: a few serve runs (continuous batching on a
trace, with preemptions, static batching, pipelined multi-chip replicas, a plain
dynamic-batching workload, an SLA rate search and a rate sweep) whose `--json` output
must not change when the serving loop is made faster.

Each run's JSON loses only what names the checkout, not the figures: `manifest.git_commit`
and the folder of every input path the manifest records (a path under the repository
is kept relative to it, so a clone elsewhere records the same); the rest is hashed
(SHA-256 of the file's bytes as written) per top-level key, so a mismatch names the
parts that moved. The runs share one cost cache folder,
filled by the first run that needs a grid point (cold and warm costs are the same
floats: the cache stores them as repr-exact JSON).

Run: `python experiments/serve_identity.py` records tests/data/serve_identity.json;
`--check` reruns every case and exits 1 listing those that differ. `--cost-cache DIR`
reuses a cache folder (default: a fresh temporary one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "tests" / "data" / "serve_identity.json"
LLAMA = ["--model", "llama_3_1_8b", "--arch", "tpu_v5e_like"]
CASES = {
    "continuous_trace": LLAMA + ["--arrival-trace", "splitwise_conv", "--rate", "0.25",
                                 "--requests", "3000", "--max-tokens", "512"],
    "continuous_preempt": LLAMA + ["--rate", "4", "--requests", "400", "--prompt-tokens",
                                   "2048", "--output-tokens", "600", "--max-batch", "64",
                                   "--arrival", "gamma", "--cv", "2", "--seed", "3"],
    "static_llm": LLAMA + ["--batching", "static", "--max-batch", "8", "--max-wait-ms",
                           "500", "--rate", "1", "--requests", "200"],
    "pipelined": LLAMA + ["--chips", "4", "--tp", "2", "--pp", "2", "--replicas", "2",
                          "--routing", "least_loaded", "--rate", "2", "--requests", "300",
                          "--arrival-trace", "splitwise_conv"],
    "shared_queue": LLAMA + ["--replicas", "3", "--routing", "shared_queue", "--rate", "3",
                             "--requests", "500", "--prompt-tokens", "700",
                             "--output-tokens", "90", "--max-tokens", "256"],
    "plain_dynamic": ["--arch", "tpu_v1", "--workload", "resnet50_b1", "--rate", "2000",
                      "--requests", "5000", "--batching", "dynamic", "--max-batch", "8",
                      "--max-wait-ms", "1"],
    "find_max_rate": LLAMA + ["--arrival-trace", "splitwise_conv", "--requests", "300",
                              "--sla", "ttft_p99_ms=800,tpot_p99_ms=30",
                              "--find-max-rate"],
    "sweep_rate": LLAMA + ["--requests", "300", "--sweep-rate", "0.5:3:3",
                           "--prompt-tokens", "300", "--output-tokens", "200"],
}


def without_checkout(value):
    """`value` with every `path` under the repository made relative to it."""
    if isinstance(value, dict):
        return {key: (relative(item) if key == "path" else without_checkout(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [without_checkout(item) for item in value]
    return value


def relative(path):
    """A path under the repository, relative to it; any other value as it is."""
    if isinstance(path, str) and Path(path).is_absolute() and Path(path).is_relative_to(ROOT):
        return str(Path(path).relative_to(ROOT))
    return path


def run_case(args: list[str], cache: str, folder: str) -> tuple[dict, float]:
    """Digest per top-level key of the case's JSON (the checkout's name removed), wall
    seconds."""
    out = Path(folder) / "result.json"
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simulator.cli", "serve", *args,
                    "--cost-cache", cache, "--json", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    result = json.loads(out.read_text())
    result.get("manifest", {}).pop("git_commit", None)
    if "manifest" in result:
        result["manifest"] = without_checkout(result["manifest"])
    return {key: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
            for key, value in sorted(result.items())}, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--cost-cache", metavar="DIR")
    parser.add_argument("--only", nargs="*", choices=sorted(CASES))
    args = parser.parse_args()
    recorded = json.loads(RECORD.read_text()) if args.check else {}
    digests, moved = {}, []
    with tempfile.TemporaryDirectory() as folder:
        cache = args.cost_cache or str(Path(folder) / "cache")
        for name in args.only or CASES:
            digests[name], wall = run_case(CASES[name], cache, folder)
            differ = sorted(k for k in digests[name] | recorded.get(name, {})
                            if digests[name].get(k) != recorded.get(name, {}).get(k))
            state = ("identical" if not differ else f"DIFFERS in {', '.join(differ)}") \
                if args.check else "recorded"
            print(f"{name:20s} {wall:6.1f} s  {state}", flush=True)
            if differ:
                moved.append(name)
    if args.check:
        return 1 if moved else 0
    RECORD.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
