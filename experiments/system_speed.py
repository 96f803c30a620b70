"""Wall time of the multi-chip acceptance run (issue 18): Llama-3.1-70B bf16 decode,
batch 1, context 2,048, `--chips 16 --tp 16` on tpu_v5e_like, as a user runs it (a fresh
`accsim run` process, imports and the searched default mapping included). One shard is
simulated per distinct shape, not 16. Target: under 5 s on 2 cores.

Run: `python experiments/system_speed.py [--repeats N]`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

COMMAND = [sys.executable, "-m", "simulator.cli", "run", "--arch", "tpu_v5e_like",
           "--model", "llama_3_1_70b", "--phase", "decode", "--context", "2048",
           "--chips", "16", "--tp", "16"]
TARGET_S = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    walls = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        done = subprocess.run(COMMAND, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            sys.exit(f"the run failed: {done.stderr.strip()}")
    fits = next(line for line in done.stdout.splitlines() if line.startswith("fits on"))
    print(" ".join(COMMAND[2:]))
    print(fits)
    print("wall s per run: " + ", ".join(f"{w:.2f}" for w in walls)
          + f"; best {min(walls):.2f} s (target < {TARGET_S:g} s)")


if __name__ == "__main__":
    main()
