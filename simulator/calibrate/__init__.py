"""Assumptions as data (DESIGN.md section 16): provenance of platform values, the
sensitivity of results to the assumed ones, robust comparisons. Imports nothing, so the
platform schema can use the provenance rules without loading the commands."""
