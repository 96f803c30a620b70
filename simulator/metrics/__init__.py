"""From counts to figures: totals and ratios of a run, energy per component, and the
bottleneck class of each operator with the rule that decided it."""
