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
import math
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from simulator.errors import AccsimError
from simulator.inputs.loader import decode_text, excerpt, parse_json, read_bytes
from simulator.numbers import decimal_float

OPERATOR_CATEGORIES = {"cpu_op", "operator"}          # "operator": older PyTorch
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"}
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
# Largest trace read (inflated): a long profile is a few hundred MiB of JSON.
MAX_TRACE_BYTES = 512 * 2**20
# Longest recorded argument parsed as a literal (a shape list is a few dozen).
MAX_LITERAL_CHARS = 10_000
# Deepest nesting of operator events on one thread (a real model's call stack is a
# few dozen deep); a deeper one is refused before it is walked.
MAX_EVENT_DEPTH = 256
# A recorded dimension is an int64 in PyTorch.
MAX_DIMENSION = 2**63 - 1
# Longest event taken as measured: 10**12 us is 11.6 days, past any profiled run (a
# profiler records seconds to minutes); 1e300 is a damaged or forged trace (issue 42).
MAX_DURATION_US = 1e12
# Latest timestamp: Kineto writes microseconds since the epoch (about 1.7e15 in 2024);
# past 2**53 a float no longer holds every whole microsecond.
MAX_TIMESTAMP_US = float(2**53)


class NoShapes(Exception):
    """An operator event without recorded input shapes."""


class BadShapes(Exception):
    """Recorded input shapes that are not lists of sizes: a damaged or forged trace."""


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
        """How an error or a note names this event (its name cut short)."""
        pid, tid = (_cut(str(label), 40) for label in self.thread)
        return f"event {_cut(self.name, 80)} (pid {pid}, tid {tid}, ts {self.ts:g})"

    @property
    def op(self) -> str:
        """The aten op the event runs, without namespace or overload:
        `aten::pow.Tensor_Scalar_out` -> `pow`; other namespaces kept."""
        if not self.name.startswith("aten::"):
            return self.name
        return self.name.removeprefix("aten::").partition(".")[0]

    @property
    def overload(self) -> str:
        """The overload an aten event's name gives (`Tensor_Scalar_out`), else ''."""
        if not self.name.startswith("aten::"):
            return ""
        return self.name.removeprefix("aten::").partition(".")[2]

    @property
    def dims(self) -> list:
        """The recorded input shapes (NoShapes where the trace has none, BadShapes
        where an entry is not a shape or a list of shapes)."""
        dims = self.args.get("Input Dims")
        if not isinstance(dims, list):
            raise NoShapes(self.where)
        for index, entry in enumerate(dims):
            if not isinstance(entry, list) or not (
                    all(_size(d) for d in entry) or
                    all(isinstance(t, list) and all(_size(d) for d in t) for t in entry)):
                raise BadShapes(f"Input Dims[{index}] is {excerpt(entry)}, not a shape (a "
                                f"list of whole numbers from 0 to {MAX_DIMENSION})")
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


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and \
        0 <= value <= MAX_DIMENSION


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
        where = f"traceEvents[{index}]"
        ts, dur = _time(raw, "ts", file, where), _time(raw, "dur", file, where)
        thread = (_label(raw, "pid", file, where), _label(raw, "tid", file, where))
        correlation = args.get("correlation")
        if not isinstance(correlation, (int, str)):
            correlation = None  # a launch or kernel without one is not matched
        if category in OPERATOR_CATEGORIES:
            name = raw.get("name", "")
            if not isinstance(name, str):
                raise AccsimError(f"name must be text, found {excerpt(name)}", file=file,
                                  field=f"{where}.name")
            operators[thread].append(Event(name, thread, ts, dur, args))
        elif category in LAUNCH_CATEGORIES and correlation is not None:
            launches[thread].append((ts, correlation))
        elif category in DEVICE_CATEGORIES and correlation is not None:
            device_us[correlation] = device_us.get(correlation, 0) + dur
    if not operators:
        raise AccsimError("no operator events (cat 'cpu_op'): not a PyTorch profiler "
                          "trace, or one recorded without CPU activity", file=file)
    roots = [root for thread in sorted(operators, key=str)
             for root in _nest(operators[thread], file)]
    roots.sort(key=lambda e: e.ts)
    by_thread = {thread: ([t for t, _ in sorted(items, key=lambda i: i[0])],
                          [c for _, c in sorted(items, key=lambda i: i[0])])
                 for thread, items in launches.items()}
    return Trace(file, roots, by_thread, device_us)


def _time(raw: dict, key: str, file: str, where: str) -> float:
    """An event's ts or dur in microseconds: a finite number, dur >= 0 (absent: 0)."""
    if key not in raw and key == "dur":
        return 0.0
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise AccsimError(f"a complete event needs a numeric {key}, found "
                          f"{excerpt(value)}", file=file, field=f"{where}.{key}")
    try:
        number = decimal_float(value) if isinstance(value, str) else float(value)
    except (ValueError, OverflowError):
        number = math.nan
    if not math.isfinite(number) or key == "dur" and not 0 <= number <= MAX_DURATION_US:
        rule = f"a number from 0 to {MAX_DURATION_US:g} us" if key == "dur" else \
            "a finite number"
        raise AccsimError(f"must be {rule}, found {excerpt(value)}", file=file,
                          field=f"{where}.{key}")
    if abs(number) > MAX_TIMESTAMP_US:
        raise AccsimError(f"must be at most {MAX_TIMESTAMP_US:g} us (microseconds past "
                          f"that are not whole in a float), found {excerpt(value)}",
                          file=file, field=f"{where}.{key}")
    return number


def _label(raw: dict, key: str, file: str, where: str):
    """An event's pid or tid: a number or a name (absent: None)."""
    value = raw.get(key)
    if value is not None and (isinstance(value, bool) or
                              not isinstance(value, (int, str))):
        raise AccsimError(f"must be a number or a name, found {excerpt(value)}",
                          file=file, field=f"{where}.{key}")
    return value


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


def _nest(events: list[Event], file: str) -> list[Event]:
    """One thread's events as trees by time containment; the roots in order."""
    roots: list[Event] = []
    stack: list[Event] = []
    for event in sorted(events, key=lambda e: (e.ts, -e.dur)):
        while stack and event.ts >= stack[-1].end:
            stack.pop()
        if len(stack) >= MAX_EVENT_DEPTH:
            raise AccsimError(f"operator events nested more than {MAX_EVENT_DEPTH} deep "
                              "on one thread", file=file, field=event.where)
        (stack[-1].children if stack else roots).append(event)
        stack.append(event)
    return roots
