"""`accsim ARGV` run in-process under an alarm: the one runner of the bad-input and
hostile-input suites, so a hang is a failure naming the bound, never a stuck test."""

from __future__ import annotations

import signal
import time

from simulator.cli import main


class Hang(Exception):
    pass


def run_main(argv: list[str], capsys, seconds: int) -> tuple[int, str, str, float]:
    """Exit code (argparse's usage error included), stdout, stderr and seconds taken;
    raises Hang when no answer comes within `seconds`."""
    def alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    started = time.perf_counter()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage error (exit 2)
        code = exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return code, out, err, time.perf_counter() - started
