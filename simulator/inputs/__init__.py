"""Reading inputs: the guarded file readers, the platform and workload schemas, the paths
results record, and the resolution of a run's three inputs (platform, workload, mapping)
that the commands and the Python API both call."""
