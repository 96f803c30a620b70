"""Global schedulers: which replica an arriving request goes to. A router whose
`shared` is true keeps one queue for all replicas instead (late binding)."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.serving.registry import Registry

ROUTERS: Registry = Registry("routing policy")


@ROUTERS.register("round_robin")
class RoundRobin:
    """Replicas in turn."""

    def __init__(self):
        self._next = 0

    def pick(self, replicas: Sequence) -> int:
        chosen = self._next % len(replicas)
        self._next += 1
        return chosen


@ROUTERS.register("least_loaded")
class LeastLoaded:
    """The replica with the fewest outstanding (waiting + running) requests; ties go
    to the lowest index."""

    def pick(self, replicas: Sequence) -> int:
        return min(range(len(replicas)), key=lambda i: (replicas[i].outstanding, i))


@ROUTERS.register("shared_queue")
class SharedQueue:
    """One queue for all replicas: whichever replica is free takes the oldest waiting
    request (a central dispatcher; with deterministic service, the M/D/c queue)."""

    shared = True

    def pick(self, replicas: Sequence) -> int:
        return 0
