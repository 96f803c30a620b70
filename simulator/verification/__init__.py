"""Checking results: rerunning a result file from its embedded inputs (rerun) and
regression of heuristics against a baseline (regression)."""
