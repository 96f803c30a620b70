"""Bottleneck classes (DESIGN.md section 4): the first rule whose conditions all hold,
in precedence order, with the measured values and thresholds that decided it.

The rules are data: one table, documented here and printed with every verdict.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

# Each metric is a fraction of the operator's total cycles unless named a ratio:
#   offchip_busy_fraction   off-chip server busy (all transfers' service cycles)
#   vector_busy_fraction    vector unit busy (vector operators' compute + epilogues)
#   useful_fraction         useful array cycles (MNK / (R*C))
#   array_setup_fraction    array cycles that are neither useful nor padding: the fold
#                           fill (scalesim model) or stationary load + skew (pipelined)
#   padding_fraction        array cycles on unused PEs of partial folds
#   memory_stall_fraction   fill + input stall + memory output stall + store tail
#   refetch_ratio           off-chip bytes / compulsory bytes
#   collective_fraction     chip-to-chip collectives on the links
#   evacuation_fraction     vector unit copying output tiles out of the accumulators
#                           (output_path: vector); a rule on a metric an operator does
#                           not have (no evacuation) is not tried, so verdicts without
#                           it are unchanged
RULES: tuple[tuple[str, tuple[tuple[str, str, float], ...]], ...] = (
    ("memory-bandwidth", (("offchip_busy_fraction", ">=", 0.80),)),
    ("vector", (("vector_busy_fraction", ">=", 0.80),)),
    ("compute", (("useful_fraction", ">=", 0.60),)),
    ("array-fill", (("array_setup_fraction", ">=", 0.40),)),
    ("mapping", (("padding_fraction", ">=", 0.25),)),
    ("buffer-capacity", (("refetch_ratio", ">=", 2.0), ("memory_stall_fraction", ">=", 0.25))),
    ("memory-latency", (("memory_stall_fraction", ">=", 0.25),
                        ("offchip_busy_fraction", "<", 0.80))),
    ("interconnect", (("collective_fraction", ">=", 0.50),)),
    # Last: the later terms (DESIGN.md section 4); an operator whose array waits on its
    # evacuations has no stronger class above (vector-caused stalls are not memory's).
    ("evacuation", (("evacuation_fraction", ">=", 0.40),)),
)
BALANCED = "balanced"
CLASSES = tuple(name for name, _ in RULES) + (BALANCED,)
_COMPARE = {">=": operator.ge, "<": operator.lt}


@dataclass(frozen=True)
class Verdict:
    """The class and, for every rule tried up to it, each condition's value."""

    bottleneck: str
    evidence: tuple[dict, ...]

    def as_dict(self) -> dict:
        return {"class": self.bottleneck, "rules_tried": list(self.evidence)}

    def reason(self) -> str:
        """One line: the deciding conditions with their measured values."""
        if self.bottleneck == BALANCED:
            return "no rule held"
        deciding = self.evidence[-1]["conditions"]
        return " and ".join(f"{c['metric']} {c['value']:.2f} {c['op']} {c['threshold']:g}"
                            for c in deciding)


def classify(metrics: dict[str, float]) -> Verdict:
    """Apply RULES in order to an operator's metrics, skipping a rule on a metric
    they do not carry (an optional term it does not have)."""
    tried = []
    for name, conditions in RULES:
        if any(metric not in metrics for metric, _, _ in conditions):
            continue
        checked = [{"metric": metric, "value": float(metrics[metric]), "op": op,
                    "threshold": threshold,
                    "held": bool(_COMPARE[op](metrics[metric], threshold))}
                   for metric, op, threshold in conditions]
        held = all(c["held"] for c in checked)
        tried.append({"class": name, "held": held, "conditions": checked})
        if held:
            return Verdict(name, tuple(tried))
    return Verdict(BALANCED, tuple(tried))
