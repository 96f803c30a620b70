"""`accsim review STUDY.yaml --out DIR`: check the study and the output folder, run (or
reuse) every simulation it needs, and write the packet."""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from simulator.options.catalog import add_options
from simulator.output.terminal import console_size
from simulator.output.files import OutputFolder
from simulator.review.packet import write_packet
from simulator.review.pipeline import ReviewOptions, prepare, review_runs
from simulator.review.providers import NotEvaluated
from simulator.review.runs import default_cache_dir, open_cache
from simulator.sweep.executors import executor_for

PACKET_FILES = ("index.html", "packet.md", "packet.json")
# Written first and kept current: the folder is a packet's, even half done, and it lists
# every file a review wrote there (simulator.output.files.OutputFolder.claim).
PACKET_MARKER = ".accsim-review"


def _kept(packet: dict) -> set[str]:
    """The files of the packet just written (results and figures it cites)."""
    return {r["path"] for r in packet["results"]} | \
        {f["file"] for s in packet["sections"] for f in s["figures"]}


def default_out(study: str) -> str:
    """The packet folder when --out is not given: `<study stem>-packet` here."""
    return f"{Path(study).name.removesuffix('.yaml').removesuffix('.yml')}-packet"


def review(args: argparse.Namespace) -> int:
    """The handler: every check before any simulation, then runs, then the packet."""
    executor = executor_for(args.scheduler, args.workers)
    prepared = prepare(args.study, ReviewOptions(args.fusion, args.ignore_capacity))
    args.out = default_out(args.study) if args.out is None else args.out  # '' refused
    # the cache first: a refused one leaves no claimed packet folder behind
    with (open_cache(args.cache, no_cache=args.no_cache) or nullcontext()) as cache, \
            OutputFolder.claim(args.out, PACKET_MARKER, field="--out",
                               signature="packet.json") as out:
        started = time.perf_counter()
        reviewed = review_runs(prepared, out, cache=cache, engine=args.engine,
                               executor=executor)
        packet = write_packet(reviewed.packet, out)
        out.remove_stale(_kept(packet))
    records, served, swept = reviewed.records, reviewed.served, reviewed.swept
    reused = sum(r.reused for r in records + [v.run for v in reviewed.varied])
    elapsed = time.perf_counter() - started
    console = Console(highlight=False, soft_wrap=True, **console_size())
    console.print(f"{escape(packet['title'])}: verdict {packet['verdict']}")
    for line in packet["first_screen"]:
        console.print(f"  {line['label']}: {line['status']} - {escape(line['text'])}")
    serving = [] if isinstance(served, NotEvaluated) else \
        [s for s in served if s.data is not None]
    console.print(f"{len(records) + len(reviewed.varied)} runs and {len(serving)} serving results "
                  f"({reused + sum(s.reused for s in serving)} reused from "
                  f"{escape(str(cache.path)) if cache else 'no cache'}) "
                  f"in {elapsed:.1f} s wall")
    if not isinstance(swept, NotEvaluated):
        summary = swept.summary
        console.print(f"sweep {escape(reviewed.study.sweep.sweep.spec.name)}: {summary.jobs} "
                      f"point x workload jobs, {summary.already_stored} already stored, "
                      f"{summary.computed} computed ({summary.failed} failed); store "
                      f"{escape(swept.store)}")
    for name in PACKET_FILES:
        console.print(f"wrote {escape(out.shown(name))}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `accsim review`."""
    parser.add_argument("study", help="study spec YAML (see experiments/studies/)")
    parser.add_argument("-o", "--out", metavar="DIR",
                        help="folder for the packet (new, empty, or a previous packet; "
                        "default: STUDY-packet in the current folder, STUDY the spec's "
                        "file name without .yaml)")
    parser.add_argument("--cache", metavar="DIR", help="result cache keyed by content "
                        f"hash (default {default_cache_dir()})")
    parser.add_argument("--no-cache", action="store_true",
                        help="simulate every run, read and write no cache")
    add_options(parser, "review", "inputs", "capacity", "executor")
    parser.set_defaults(handler=review)
