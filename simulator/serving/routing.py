"""Global schedulers: which replica an arriving request goes to."""

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
