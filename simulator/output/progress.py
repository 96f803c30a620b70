"""Progress of long commands on stderr: one rich bar implementation for every verb
(run, compare, regress, map, serve, sweep, review, export). It draws only when stderr is a
terminal, so piped output and tests see nothing, and vanishes when done (transient).

The simulator's callbacks come in three shapes; each has a context manager here that
yields the matching callback: `operators` (simulate(): done, total, operator name),
`search` (the mapper: done, total, operator, candidates tried) and `steps` (serving:
done, total). `Bar` is the bar they share, used directly where a caller counts itself
(the sweep's stored points). `operators` and `search` also say when Numba compiles the
kernels (`compiling`: a first run on a machine, before its on-disk cache holds them).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                           TextColumn, TimeElapsedColumn)
from rich.text import Text

from simulator.kernels import library as kernel_library
from simulator.output.terminal import console_size, markup_safe


class _Rate(ProgressColumn):
    """The bar's recent rate, in `unit` per second."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task) -> Text:
        return Text(f"{task.speed:.1f} {self.unit}/s" if task.speed else "")


class _Remaining(ProgressColumn):
    """Time left at the average rate since the start: elapsed x left / done. Work here
    finishes in bursts (a deployment search's pruned points at once, then groups that
    each simulate for seconds), so rich's own estimate, from the rate of the last few
    updates, read 0:00:01 for most of a 20 s search; this one grows while nothing
    finishes."""

    def render(self, task) -> Text:
        if not task.total or not task.completed or task.elapsed is None:
            return Text("-:--:--")
        left = task.elapsed * (task.total - task.completed) / task.completed
        return Text(remaining_text(left))


def remaining_text(seconds: float) -> str:
    """H:MM:SS, rounded up to the second (never 0:00:00 while work is left)."""
    whole = max(0, int(-(-seconds // 1)))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class Bar:
    """One transient bar on stderr: a description, the bar and done/total, and on
    request a running count (`count="candidates"`), a rate (`rate="points"`) and the
    elapsed and remaining time (`eta`). It starts drawing on entry, or with
    `wait=True` at the first report (the mapper reports once its worker processes
    exist, so they never fork a process with a refresh thread) and, with `after_s`,
    only once that long has passed (short runs show no bar)."""

    def __init__(self, description: str, *, total: int | None = None,
                 count: str | None = None, rate: str | None = None, eta: bool = False,
                 wait: bool = False, after_s: float = 0.0) -> None:
        console = Console(stderr=True, **console_size())
        columns: list = [TextColumn("[progress.description]{task.description}"),
                         BarColumn(), MofNCompleteColumn()]
        if count:
            columns.append(TextColumn(f"{{task.fields[count]:,}} {count}"))
        if rate:
            columns.append(_Rate(rate))
        if eta:
            columns += [TimeElapsedColumn(), TextColumn("ETA"), _Remaining()]
        self.progress = Progress(*columns, console=console, transient=True,
                                 disable=not console.is_terminal)
        self.task = self.progress.add_task(description, total=total, count=0)
        self.wait = wait or after_s > 0
        self.after_s = after_s
        self.started_at = time.perf_counter()
        self.drawing = False

    def update(self, done: int, total: int | None, description: str | None = None,
               count: int | None = None) -> None:
        """Set the figures (a total of None or 0 pulses); starts a waiting bar."""
        fields = {} if count is None else {"count": count}
        if description is not None:
            fields["description"] = description
        self.progress.update(self.task, completed=done, total=total or None, **fields)
        self._start_due()

    def describe(self, text: str) -> str:
        """Show `text` as the description; return the one it replaces."""
        shown = self.progress.tasks[0].description
        self.progress.update(self.task, description=text)
        return shown

    def advance(self, steps: int = 1) -> None:
        self.progress.advance(self.task, steps)
        self._start_due()

    def _start_due(self) -> None:
        if not self.drawing and time.perf_counter() - self.started_at >= self.after_s:
            self.progress.start()
            self.drawing = True

    def __enter__(self) -> Bar:
        if not self.wait:
            self.progress.start()
            self.drawing = True
        return self

    def __exit__(self, *exc) -> None:
        if self.drawing:
            self.progress.stop()


@contextmanager
def operators(label: str = "", *, first: str = "lowering",
              total: int | None = None) -> Iterator[Callable[[int, int, str], None]]:
    """simulate()'s callback: the bar shows `first` (pulsing while the kernels load
    and the operators lower, unless `total` is known), then counts operators as
    "simulating NAME"; `label` (a platform, say) prefixes both."""
    prefix = f"{markup_safe(label)}: " if label else ""
    with Bar(f"{prefix}{first}", total=total) as bar, compiling(bar):

        def report(done: int, total: int, name: str) -> None:
            bar.update(done, total, f"{prefix}simulating {markup_safe(name)}")

        yield report


@contextmanager
def search(description: str) -> Iterator[Callable[[int, int, str, int], None]]:
    """The mapper's callback: operators searched of all, the one being searched and
    the candidates tried so far; drawn from the first report on."""
    with Bar(description, count="candidates", wait=True) as bar, compiling():
        tried = [0]

        def report(done: int, total: int, name: str, candidates: int) -> None:
            tried[0] += candidates
            bar.update(done, total, f"{description} {markup_safe(name)}".rstrip(),
                       count=tried[0])

        yield report


@contextmanager
def steps(description: str, *, after_s: float) -> Iterator[Callable[[int, int], None]]:
    """A (done, total) callback with elapsed and remaining time, drawn only once the
    work has taken `after_s` seconds."""
    with Bar(description, eta=True, after_s=after_s) as bar:
        yield lambda done, total: bar.update(done, total)


COMPILING = "compiling kernels (first run only; Numba caches them on disk)"


class _CompileNote:
    """The handlers of a Numba "numba:compile" listener: when a kernel's compilation
    starts (outermost only), say so once on stderr and in `bar`'s description until it
    ends."""

    def __init__(self, console: Console, bar: Bar | None) -> None:
        self.console = console
        self.bar = bar
        self.depth = 0
        self.said = False
        self.shown = ""

    def on_start(self, event) -> None:
        self.depth += 1
        if self.depth == 1:
            if not self.said:
                self.console.print(COMPILING, highlight=False)
                self.said = True
            if self.bar is not None:
                self.shown = self.bar.describe(COMPILING)

    def on_end(self, event) -> None:
        self.depth -= 1
        if self.depth == 0 and self.bar is not None:
            self.bar.describe(self.shown)


@contextmanager
def compiling(bar: Bar | None = None) -> Iterator[None]:
    """On a terminal, tell the user while Numba compiles a kernel (a cache miss) in this
    process: one line on stderr, and `bar` says so while it lasts. Not while the kernel
    library serves the calls and Numba is not loaded: listening would load it (a third
    of a second) for compilations that mostly cannot happen; a kernel outside the
    library then compiles unannounced."""
    console = Console(stderr=True, **console_size())
    if not console.is_terminal or ("numba" not in sys.modules and kernel_library.load()):
        yield
        return
    from numba.core import event  # only now: Numba is loaded by the kernels' first use
    with event.install_listener("numba:compile", compile_note(console, bar)):
        yield


def compile_note(console: Console, bar: Bar | None):
    """A Numba listener for "numba:compile" events running _CompileNote's handlers."""
    from numba.core import event
    return type("CompileNote", (_CompileNote, event.Listener), {})(console, bar)


def status(text: str):
    """A spinner on stderr while one long step runs, only on a terminal."""
    console = Console(stderr=True, **console_size())
    return console.status(markup_safe(text)) if console.is_terminal else nullcontext()
