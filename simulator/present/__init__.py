"""Presenting a result: tables, JSON and CSV (run_report), the typed result views,
figures, Perfetto timelines, the mapping sheet and plan checks."""
