"""Readers of what users already have, each producing a Workload (DESIGN.md sections 9
and 13). Every frontend is one format of the one verb `accsim import FORMAT FILE`
(simulator.frontends.import_command); each format lives in its own subpackage."""
