"""`accsim ARGV` run in-process under a bound: the one runner of the bad-input and
hostile-input suites, so a hang is a failure naming the bound, never a stuck test.

The bound is on CPU seconds, which a loaded machine does not inflate (issue 42: the
suite passes at load 8): a profiling timer (ITIMER_PROF, counted in this process's CPU
time) stops work that runs away, and a wall-clock alarm WAIT_FACTOR times longer stops a
run blocked without working (a FIFO read, a lock). The seconds returned are CPU
seconds, the quantity a test bounds. Numba's compilation is not counted, and both
timers stand still while it runs: a cold cache (a fresh CI environment) compiles each
kernel once per process, whichever case calls it first, and a case that took 1.5 CPU s
took over 5 with it. `cpu_bound` is the same bound around any call;
HANG_S is the wall-clock limit of a test's subprocess or wait, there only to end a
hang (no test asserts wall time)."""

from __future__ import annotations

import resource
import signal
import time
from contextlib import contextmanager

from numba.core import event

from simulator.cli import main

# Wall seconds per CPU second before a blocked run counts as hung. Measured: a refusal
# taking 1.45 CPU s took 13.6 s of wall at load 15 on 2 cores (9.4x); 24 leaves room
# for load 16 and more, and only a run that is really blocked waits that long.
WAIT_FACTOR = 24
# A subprocess's wall-clock limit (subprocess.run's timeout) and the longest a test
# waits for something to happen: generous at any load; reaching it means a hang.
HANG_S = 600


def cpu_limit(seconds: int):
    """A subprocess's preexec_fn: the child (and each process it starts) stopped by
    SIGXCPU after `seconds` of its own CPU time, which a loaded machine does not
    inflate; pair it with a wall timeout of HANG_S or more, for a child that blocks."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    return limit


class Hang(Exception):
    pass


class _Compiling(event.Listener):
    """Numba's compilations within a bound: the timers paused while one runs, and the
    CPU seconds they took (`seconds`)."""

    def __init__(self) -> None:
        self.depth, self.started, self.seconds = 0, 0.0, 0.0
        self.paused: tuple[float, float] = (0.0, 0.0)

    def on_start(self, _event) -> None:
        self.depth += 1
        if self.depth == 1:
            self.paused = (signal.setitimer(signal.ITIMER_PROF, 0)[0],
                           signal.setitimer(signal.ITIMER_REAL, 0)[0])
            self.started = time.process_time()

    def on_end(self, _event) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.seconds += time.process_time() - self.started
            cpu, wall = self.paused
            signal.setitimer(signal.ITIMER_PROF, cpu)
            signal.setitimer(signal.ITIMER_REAL, wall)


@contextmanager
def cpu_bound(seconds: float, what: str = "no answer"):
    """The block runs under `seconds` of this process's CPU time (Hang when it works
    longer) and WAIT_FACTOR times that on the wall clock (Hang when it waits), Numba's
    compilations not counted. Yields the listener whose `seconds` are the CPU seconds
    those compilations took."""
    def ran_away(signum, frame):
        raise Hang(f"{what} within {seconds} CPU seconds")

    def blocked(signum, frame):
        raise Hang(f"{what} within {seconds * WAIT_FACTOR} s of waiting")

    previous = signal.signal(signal.SIGPROF, ran_away), signal.signal(signal.SIGALRM,
                                                                       blocked)
    compiling = _Compiling()
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WAIT_FACTOR)
    try:
        with event.install_listener("numba:compile", compiling):
            yield compiling
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, previous[0])
        signal.signal(signal.SIGALRM, previous[1])


def run_main(argv: list[str], capsys, seconds: float) -> tuple[int, str, str, float]:
    """Exit code (argparse's usage error included), stdout, stderr and CPU seconds
    taken (Numba's compilations not counted); raises Hang when the run works `seconds`
    of CPU time, or waits WAIT_FACTOR times that on the wall clock, without an answer."""
    started = time.process_time()
    with cpu_bound(seconds) as compiling:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own usage error (exit 2)
            code = exc.code
    out, err = capsys.readouterr()
    return code, out, err, time.process_time() - started - compiling.seconds


def cpu_seconds(call) -> tuple[object, float]:
    """What `call()` returns and the CPU seconds it took (this process's threads):
    the measure a test may bound, unlike wall time on a shared machine."""
    started = time.process_time()
    answer = call()
    return answer, time.process_time() - started


def assert_one_clear_error(code, out: str, err: str, elapsed: float, seconds: float,
                           fragments) -> str:
    """What run_main gave is a refusal as the hostile suites want one: a non-zero
    exit, no traceback, one `error:` line (alone on stderr for an AccsimError, exit
    1), within `seconds` of CPU, naming every fragment. Returns that line."""
    assert code not in (0, None), f"accepted: {out[-400:]}"
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    if code == 1:  # an AccsimError: that line alone
        assert err.strip() == errors[0]
    assert elapsed < seconds
    for fragment in fragments:
        assert fragment in errors[0], f"{fragment!r} not in {errors[0]!r}"
    return errors[0]
