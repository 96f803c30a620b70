"""A platform's DVFS table and what a point of it does to the platform (DESIGN.md
section 20): `dvfs.points`, the clocks the chip may run at, each with its supply
voltage or its full-load power, from the lowest clock up to the platform's own
clock_ghz (the point its energy table is for; a power cap only lowers the clock), and
an optional `dvfs.power_cap_w`, the chip's power cap (simulator.metrics.power_cap picks the
clock it leaves a run).

The model, the standard CMOS one (Weste and Harris, "CMOS VLSI Design", 4th ed.,
section 5.1: dynamic power P = a C V^2 f, leakage power = V x I_leak): at a point of
voltage V against the nominal point's V0, every on-chip event's energy (a MAC, an SRAM
byte, a vector op) scales by (V / V0)^2 and the on-chip static power (array, SRAM,
vector unit, the rest of the core) by V / V0; the off-chip memory's energy per byte,
its static power and the chip-to-chip links' energy are on their own supplies and stay
as they are. A point that gives its full-load power P instead of a voltage fixes the
same scale from the power: energy per event x ((P - S) / f) / ((P0 - S) / f0), S the
static power, which then stays as it is (no voltage says how it moves). Every other
figure follows the clock: cycles -> seconds, bytes per cycle of a bandwidth in GB/s,
fields given in microseconds. Fields given in cycles (latencies, overheads) stay in
cycles of the new clock.

Pure data and rules (pydantic and the standard library), as provenance is, so the
platform schema can carry the table without importing anything above itself."""

from __future__ import annotations

import math

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, model_serializer,
                      model_validator)
from pydantic_core import InitErrorDetails, PydanticCustomError

# Relative tolerance of "a point at clock_ghz" (MHz written for GHz: 1500 for 1.5).
CLOCK_MATCH = 1e-9
# Dynamic energy and on-chip static power scale with the point; these stay as they are.
DYNAMIC_FIELDS = ("sram_read_pj_per_byte", "sram_write_pj_per_byte", "vector_op_pj")
STATIC_FIELDS = ("array_w", "sram_w", "vector_w", "other_w")


class DvfsPoint(BaseModel):
    """One operating point: its clock, and its supply voltage or its full-load power
    (the chip's whole power, static included, running flat out at that clock)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True,
                              allow_inf_nan=False)

    clock_mhz: float = Field(gt=0, le=1e6, description="MHz")
    voltage_v: float | None = Field(default=None, gt=0, le=100, description="supply volts")
    power_w: float | None = Field(default=None, gt=0, le=1e6,
                                  description="full-load power at this clock, watts")

    @model_serializer(mode="wrap")
    def _given(self, handler) -> dict:
        return without_none(handler(self))

    @model_validator(mode="after")
    def _one_figure(self) -> DvfsPoint:
        if (self.voltage_v is None) == (self.power_w is None):
            raise ValueError("a DVFS point gives voltage_v or power_w (one of them)")
        return self


class Dvfs(BaseModel):
    """The operating points, ascending to clock_ghz, and the chip's power cap."""

    model_config = DvfsPoint.model_config

    points: list[DvfsPoint] = Field(min_length=1, max_length=64)
    power_cap_w: float | None = Field(default=None, gt=0, le=1e6,
                                      description="the chip's power cap, watts")

    @model_serializer(mode="wrap")
    def _given(self, handler) -> dict:
        return without_none(handler(self))


def without_none(data: dict) -> dict:
    """A dump as a file writes it: the optional figures not given left out."""
    return {key: value for key, value in data.items() if value is not None}


def check_platform(platform):
    """A Platform validator (simulator.inputs.platform): the table's rules
    (table_errors) against the platform's clock and static power, and each DVFS
    value (a cap included) cited or marked assumed in its provenance."""
    if platform.dvfs is None:
        return platform
    static = sum(platform.energy.static_power.model_dump().values())
    problems = [(("dvfs", "points", *loc), rule) for loc, rule in
                table_errors(platform.dvfs.points, platform.clock_ghz, static)]
    problems += [(tuple(int(part) if part.isdigit() else part for part in path.split(".")),
                  f"a DVFS value or cap must be cited or marked assumed: add a "
                  f"provenance entry {path}")
                 for path in platform.numeric_fields()
                 if path.startswith("dvfs.") and path not in platform.provenance]
    if problems:
        raise ValidationError.from_exception_data("Platform", [InitErrorDetails(
            type=PydanticCustomError("dvfs", rule), loc=loc, input=None)
            for loc, rule in problems])
    return platform


def table_errors(points: list[DvfsPoint], clock_ghz: float,
                 static_w: float) -> list[tuple[tuple, str]]:
    """(location, rule broken) for each fault of a platform's table: points in strictly
    ascending clock order, the same figure (voltage or power) on every point, never
    falling as the clock rises, the last point at clock_ghz, and each full-load power
    above the static power (its dynamic part > 0)."""
    errors: list[tuple[tuple, str]] = []
    kind = "voltage_v" if points[0].voltage_v is not None else "power_w"
    for index, point in enumerate(points):
        if getattr(point, kind) is None:
            errors.append(((index,), f"every point gives the same figure: point 0 gives "
                           f"{kind}, this one does not"))
            continue
        if kind == "power_w" and point.power_w <= static_w:
            errors.append(((index, "power_w"), f"{point.power_w:g} W is not above the "
                           f"platform's static power, {static_w:g} W"))
        if index == 0:
            continue
        before = points[index - 1]
        if point.clock_mhz <= before.clock_mhz:
            errors.append(((index, "clock_mhz"), f"points are in strictly ascending "
                           f"clock order: {point.clock_mhz:g} MHz follows "
                           f"{before.clock_mhz:g} MHz"))
        elif getattr(before, kind) is not None and getattr(point, kind) < getattr(before, kind):
            errors.append(((index, kind), f"{kind} falls as the clock rises "
                           f"({getattr(point, kind):g} at {point.clock_mhz:g} MHz, "
                           f"{getattr(before, kind):g} at {before.clock_mhz:g} MHz)"))
    if not math.isclose(points[-1].clock_mhz, clock_ghz * 1e3, rel_tol=CLOCK_MATCH):
        errors.append(((len(points) - 1, "clock_mhz"), f"the last (highest) point is the "
                       f"platform's clock_ghz, {clock_ghz * 1e3:g} MHz, whose energy table "
                       f"the others scale (a cap only lowers the clock); found "
                       f"{points[-1].clock_mhz:g} MHz"))
    return errors


def scales(points: list[DvfsPoint], index: int, static_w: float) -> tuple[float, float]:
    """(dynamic energy scale, on-chip static power scale) of point `index` against the
    nominal (last) point: ((V / V0)^2, V / V0), or from full-load powers
    (((P - S) / f) / ((P0 - S) / f0), 1)."""
    point, nominal = points[index], points[-1]
    if point.voltage_v is not None:
        ratio = point.voltage_v / nominal.voltage_v
        return ratio * ratio, ratio
    per_cycle = (point.power_w - static_w) / point.clock_mhz
    return per_cycle / ((nominal.power_w - static_w) / nominal.clock_mhz), 1.0


def at_point(raw: dict, index: int, static_w: float) -> dict:
    """A platform as a file holds it (its canonical dump, DVFS table and provenance
    included) run at point `index` of its table, uncapped: the clock and the energy
    table moved there, the table kept up to that point (now its last: the point the
    energy table is for), the cap dropped, and the provenance of every changed value
    saying how it was derived. The caller validates it."""
    points = [DvfsPoint.model_validate(point) for point in raw["dvfs"]["points"]]
    dynamic, static = scales(points, index, static_w)
    point, energy = points[index], raw["energy"]
    moved = {**{f"energy.mac_pj.{dtype}": dynamic for dtype in energy["mac_pj"]},
             **{f"energy.{name}": dynamic for name in DYNAMIC_FIELDS},
             **{f"energy.static_power.{name}": static for name in STATIC_FIELDS}}
    out = {**raw, "clock_ghz": point.clock_mhz / 1e3,
           "energy": {**energy, "mac_pj": {dtype: pj * dynamic for dtype, pj
                                           in energy["mac_pj"].items()},
                      **{name: energy[name] * dynamic for name in DYNAMIC_FIELDS},
                      "static_power": {**energy["static_power"], **{
                          name: energy["static_power"][name] * static
                          for name in STATIC_FIELDS}}},
           "dvfs": {"points": [p.model_dump(exclude_none=True)
                               for p in points[:index + 1]]}}
    figure = "voltage_v" if point.voltage_v is not None else "power_w"
    how = (f"DVFS point {index} ({point.clock_mhz:g} MHz) of the platform at "
           f"{points[-1].clock_mhz:g} MHz: ")
    scaled = {path for path, scale in moved.items() if scale != 1.0}
    cited = raw.get("provenance") or {}
    provenance = {path: entry for path, entry in cited.items()
                  if path not in scaled and path != "clock_ghz"
                  and not path.startswith("dvfs.")}
    provenance["clock_ghz"] = {"kind": "derived", "source": how + "its clock",
                               "from": [f"dvfs.points.{index}.clock_mhz"]}
    for path in sorted(scaled):
        provenance[path] = {"kind": "derived", "from": [f"dvfs.points.{index}.{figure}"],
                            "source": how + f"the nominal value x {moved[path]:.6g}"}
    for key in range(index + 1):  # the table's own entries, for the points kept
        for name in ("clock_mhz", figure):
            path = f"dvfs.points.{key}.{name}"
            if path in cited:
                provenance[path] = cited[path]
    out["provenance"] = provenance
    return out
