"""What an import left out, folded or approximated, counted so that nothing is dropped
silently: the counts become the import's notes (printed, and comments in the YAML)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from simulator.errors import AccsimError


# The reason of an op that has no converter at all.
NO_CONVERTER = "no accsim operator for the op"


class Unsupported(Exception):
    """A node or event of a known op type in a form accsim cannot express (a 3-D
    convolution, a transposed one...): counted under `op (reason)`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _counts(counter: Counter) -> str:
    return ", ".join(f"{count} {name}" for name, count in sorted(
        counter.items(), key=lambda item: (-item[1], item[0])))


@dataclass
class Tally:
    """Counts by op name of what did not become an operator as it stands."""

    unsupported: Counter = field(default_factory=Counter)  # left out, "op (reason)"
    reasons: Counter = field(default_factory=Counter)      # left out, by reason
    shape_only: Counter = field(default_factory=Counter)   # zero cost, move no data
    moves_data: Counter = field(default_factory=Counter)   # zero cost, but copy data
    proxies: Counter = field(default_factory=Counter)      # "Sigmoid as silu"
    assumed: Counter = field(default_factory=Counter)      # values the file lacks
    absorbed: Counter = field(default_factory=Counter)     # inside an attention
    fitted: list[str] = field(default_factory=list)        # windows fitted (shapes.py)
    first_unsupported: tuple[str, str] | None = None       # (where, op and why) of the first

    def leave_out(self, op: str, where: str, reason: str = NO_CONVERTER,
                  detail: str = "") -> None:
        """Count an op left out, under its op and the reason; remember where the first
        one was (with `detail`, e.g. its recorded shapes, for --strict)."""
        label = op if reason == NO_CONVERTER else f"{op} ({reason})"
        self.unsupported[label] += 1
        self.reasons[reason] += 1
        if self.first_unsupported is None:
            because = "; ".join(part for part in (
                "" if reason == NO_CONVERTER else reason, detail) if part)
            self.first_unsupported = (where, op + (f" ({because})" if because else ""))

    def notes(self) -> list[str]:
        """One line per non-empty count, worst news first."""
        lines = []
        if self.unsupported:
            lines.append(f"UNSUPPORTED, left out ({sum(self.unsupported.values())}): "
                         f"{_counts(self.unsupported)}")
            lines.append(f"left out by reason: {_counts(self.reasons)}")
        if self.moves_data:
            lines.append("zero cost although they move data (accsim has no copy kind): "
                         f"{_counts(self.moves_data)}")
        if self.shape_only:
            lines.append(f"folded as zero cost (shape only): {_counts(self.shape_only)}")
        if self.absorbed:
            lines.append(f"absorbed into attention operators (scale and mask not costed): "
                         f"{_counts(self.absorbed)}")
        if self.assumed:
            lines.append(f"assumed where the file does not say: {_counts(self.assumed)}")
        if self.proxies:
            lines.append(f"costed as the nearest vector kind: {_counts(self.proxies)}")
        if self.fitted:
            shown = ", ".join(self.fitted[:5]) + (", ..." if len(self.fitted) > 5 else "")
            lines.append(f"{len(self.fitted)} windows with asymmetric pads, unequal "
                         "strides or ceil_mode: padding folded into h/w so the output "
                         f"size and MACs are exact, input bytes approximate ({shown})")
        return lines

    def refuse_unsupported(self, file: str) -> None:
        """--strict: one error naming the first unsupported node or event and the
        counts of all of them."""
        if self.unsupported:
            where, what = self.first_unsupported
            raise AccsimError(f"--strict: {what} is not supported (unsupported in all: "
                              f"{_counts(self.unsupported)})", file=file, field=where)
