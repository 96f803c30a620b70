"""A PyTorch profiler (Kineto) trace read into what the importer needs: each thread's
operator events as a tree (an aten::linear holds the aten::addmm it calls), and the
device time each event's kernel launches took.

Kineto writes Chrome trace JSON (`.json`, or `.json.gz`): complete events (`ph: X`)
with `ts` and `dur` in microseconds. CPU operators are `cat: cpu_op` events with
`args["Input Dims"]` when recorded with `record_shapes=True`; a kernel launch
(`cat: cuda_runtime`, on the operator's thread, inside its interval) and the kernel it
starts (`cat: kernel`, on the device's stream) share `args.correlation`.
"""

from __future__ import annotations

import ast
import bisect
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from simulator.errors import AccsimError
from simulator.loader import decode_text, parse_json, read_bytes

OPERATOR_CATEGORIES = {"cpu_op", "operator"}          # "operator": older PyTorch
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"}
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
# Largest trace read (inflated): a long profile is a few hundred MiB of JSON.
MAX_TRACE_BYTES = 512 * 2**20
# Longest recorded argument parsed as a literal (a shape list is a few dozen).
MAX_LITERAL_CHARS = 10_000


class NoShapes(Exception):
    """An operator event without recorded input shapes."""


@dataclass
class Event:
    """One operator event and the events nested inside it on its thread."""

    name: str
    thread: tuple          # (pid, tid)
    ts: float              # microseconds
    dur: float
    args: dict
    children: list[Event] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def where(self) -> str:
        """How an error or a note names this event."""
        pid, tid = self.thread
        return f"event {self.name} (pid {pid}, tid {tid}, ts {self.ts:g})"

    @property
    def dims(self) -> list:
        """The recorded input shapes (NoShapes where the trace has none)."""
        dims = self.args.get("Input Dims")
        if not isinstance(dims, list):
            raise NoShapes(self.where)
        return dims

    def concrete(self, position: int, default=None):
        """A recorded scalar or list argument (args 'Concrete Inputs', PyTorch >= 2.1),
        as a Python literal; `default` where it is absent or empty."""
        values = self.args.get("Concrete Inputs")
        if not isinstance(values, list) or position >= len(values) or \
                values[position] in ("", None):
            return default
        text = values[position]
        if not isinstance(text, str) or len(text) > MAX_LITERAL_CHARS:
            return text
        try:
            return ast.literal_eval(text)  # literals only: nothing is executed
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text


@dataclass(frozen=True)
class Trace:
    """Operator trees per thread, roots in time order, and the device time of each
    launch correlation."""

    file: str
    roots: list[Event]
    launches: dict[tuple, tuple[list[float], list]]   # thread -> (ts sorted, correlation)
    device_us: dict                                     # correlation -> kernel time

    def device_time_us(self, event: Event) -> float | None:
        """Device time of the kernels launched inside an event; None if it launched
        none."""
        if event.thread not in self.launches:
            return None
        times, correlations = self.launches[event.thread]
        first = bisect.bisect_left(times, event.ts)
        last = bisect.bisect_right(times, event.end)
        found = [self.device_us[c] for c in correlations[first:last] if c in self.device_us]
        return sum(found) if found else None


def read_trace(path: str | Path) -> Trace:
    """Read a Kineto trace (.json or .json.gz) into operator trees."""
    file = str(path)
    events = _events(file)
    operators: dict[tuple, list[Event]] = defaultdict(list)
    launches: dict[tuple, list[tuple[float, object]]] = defaultdict(list)
    device_us: dict = {}
    for index, raw in enumerate(events):
        if not isinstance(raw, dict) or raw.get("ph") != "X":
            continue
        category = str(raw.get("cat", "")).lower()
        args = raw.get("args") if isinstance(raw.get("args"), dict) else {}
        try:
            ts, dur = float(raw["ts"]), float(raw.get("dur", 0))
            thread = (raw.get("pid"), raw.get("tid"))
        except (KeyError, TypeError, ValueError):
            raise AccsimError("a complete event needs a numeric ts and dur", file=file,
                              field=f"traceEvents[{index}]") from None
        if category in OPERATOR_CATEGORIES:
            operators[thread].append(Event(str(raw.get("name", "")), thread, ts, dur,
                                           args))
        elif category in LAUNCH_CATEGORIES and "correlation" in args:
            launches[thread].append((ts, args["correlation"]))
        elif category in DEVICE_CATEGORIES and "correlation" in args:
            device_us[args["correlation"]] = device_us.get(args["correlation"], 0) + dur
    if not operators:
        raise AccsimError("no operator events (cat 'cpu_op'): not a PyTorch profiler "
                          "trace, or one recorded without CPU activity", file=file)
    roots = [root for thread in sorted(operators, key=str)
             for root in _nest(operators[thread])]
    roots.sort(key=lambda e: e.ts)
    by_thread = {thread: ([t for t, _ in sorted(items, key=lambda i: i[0])],
                          [c for _, c in sorted(items, key=lambda i: i[0])])
                 for thread, items in launches.items()}
    return Trace(file, roots, by_thread, device_us)


def _gunzip(data: bytes, file: str) -> bytes:
    """A .json.gz trace inflated, refused past MAX_TRACE_BYTES (a small gzip can
    inflate to any size)."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_TRACE_BYTES + 1)
    except zlib.error as exc:
        raise AccsimError(f"corrupt or truncated gzip ({exc})", file=file) from None
    if len(out) > MAX_TRACE_BYTES:
        raise AccsimError(f"inflates to more than the {MAX_TRACE_BYTES:,} bytes a trace "
                          "may have", file=file)
    if not inflater.eof:
        raise AccsimError("corrupt or truncated gzip (ends early)", file=file)
    return out


def _events(file: str) -> list:
    data = read_bytes(file, max_bytes=MAX_TRACE_BYTES)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, file)
    raw = parse_json(decode_text(data, file=file).text, file=file)
    events = raw.get("traceEvents") if isinstance(raw, dict) else raw
    if not isinstance(events, list):
        raise AccsimError("expected a Chrome trace: an object with a traceEvents list",
                          file=file)
    return events


def _nest(events: list[Event]) -> list[Event]:
    """One thread's events as trees by time containment; the roots in order."""
    roots: list[Event] = []
    stack: list[Event] = []
    for event in sorted(events, key=lambda e: (e.ts, -e.dur)):
        while stack and event.ts >= stack[-1].end:
            stack.pop()
        (stack[-1].children if stack else roots).append(event)
        stack.append(event)
    return roots
