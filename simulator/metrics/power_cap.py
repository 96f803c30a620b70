"""A chip under a power cap (DESIGN.md section 20): the clock the cap leaves a run is
the highest point of the platform's DVFS table (simulator.inputs.dvfs) whose modelled
power at the run's utilisation fits under the cap. The run is then the plain run of
the platform at that point - its clock and energy table moved there - so every figure
(cycles -> seconds, energy, power, serving latencies) follows the clock, and equals a
run of a platform written at that point directly.

What "the run's utilisation" is comes from the caller, as `power_of`: `accsim run`
takes the run's own average power (its energy over its time); serving takes a chip's
power in a full-load iteration (simulator.serving.serve.prepare). The points are tried
from the top down, each run once; the chosen point's run is handed back for reuse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from simulator.errors import AccsimError
from simulator.inputs.dvfs import at_point
from simulator.inputs.loader import validate_model
from simulator.inputs.platform import Platform
from simulator.inputs.platform_file import as_file
from simulator.metrics.energy import static_power_w

Run = TypeVar("Run")
# The option that caps a run from the command line (else the platform's dvfs.power_cap_w).
OPTION = "--power-cap-w"


@dataclass(frozen=True)
class CapChoice:
    """What a cap chose: the cap, the point run, and each point tried from the top down
    with its power at the run's utilisation."""

    cap_w: float
    clock_mhz: float
    nominal_mhz: float
    power_w: float
    tried: tuple[tuple[float, float], ...]   # (clock MHz, watts), highest clock first

    def record(self) -> dict:
        """What a result's JSON says of the cap."""
        return {"cap_w": self.cap_w, "clock_mhz": self.clock_mhz,
                "nominal_clock_mhz": self.nominal_mhz, "power_w": self.power_w,
                "tried": [{"clock_mhz": mhz, "power_w": watts} for mhz, watts in self.tried]}

    def line(self) -> str:
        """One line for the terminal."""
        above = "".join(f"; {mhz:,.0f} MHz: {watts:,.4g} W" for mhz, watts in self.tried[:-1])
        return (f"power cap {self.cap_w:,.4g} W: clock {self.clock_mhz:,.0f} MHz of "
                f"{self.nominal_mhz:,.0f} nominal, {self.power_w:,.4g} W at this run's "
                f"utilisation{above}")


def average_power_w(result) -> float:
    """A run's average power (simulator.simulate.RunResult): its energy over its time,
    static included; 0 for a run of no time."""
    total = result.total
    seconds = result.platform.seconds(total.cycles)
    return total.energy_pj * 1e-12 / seconds if seconds else 0.0


def cap_in_force(platform: Platform, option_w: float | None) -> float | None:
    """The cap a run is held to: the option's, else the platform's, else none."""
    if option_w is not None:
        return option_w
    return platform.dvfs.power_cap_w if platform.dvfs is not None else None


def platform_at(platform: Platform, index: int, *, file: str | None) -> Platform:
    """The platform run at point `index` of its DVFS table, uncapped (the last point:
    the platform itself less its cap, so its figures are the uncapped run's)."""
    raw = as_file(platform)
    if index == len(platform.dvfs.points) - 1:
        raw["dvfs"] = {"points": raw["dvfs"]["points"]}
        raw.get("provenance", {}).pop("dvfs.power_cap_w", None)
    else:
        raw = at_point(raw, index, static_power_w(platform))
    return validate_model(raw, Platform, file=file or platform.name)


def capped(platform: Platform, cap_w: float | None,
           power_of: Callable[[Platform], tuple[float, Run]], *, file: str | None,
           from_option: bool) -> tuple[Platform, Run | None, CapChoice | None]:
    """The platform at the highest DVFS point whose power (`power_of`: watts at the
    run's utilisation, and the run) is at most `cap_w`, that run, and the choice;
    the platform itself, None, None without a cap. No point fitting, or a cap without
    a table, is one error naming the platform file and the cap's field."""
    if cap_w is None:
        return platform, None, None
    field = OPTION if from_option else "dvfs.power_cap_w"
    if platform.dvfs is None:
        raise AccsimError(f"a power cap needs the platform's DVFS table (dvfs.points) to "
                          f"choose a clock from; {platform.name} has none", file=file,
                          field=field)
    points = platform.dvfs.points
    tried: list[tuple[float, float]] = []
    for index in reversed(range(len(points))):
        candidate = platform_at(platform, index, file=file)
        watts, run = power_of(candidate)
        tried.append((points[index].clock_mhz, watts))
        if watts <= cap_w:
            return candidate, run, CapChoice(cap_w, points[index].clock_mhz,
                                             points[-1].clock_mhz, watts, tuple(tried))
    raise AccsimError(f"no DVFS point fits the power cap of {cap_w:,.4g} W: the lowest, "
                      f"{points[0].clock_mhz:,.0f} MHz, draws {tried[-1][1]:,.4g} W at this "
                      "run's utilisation (raise the cap, or add lower points)", file=file,
                      field=field)
