"""The core verbs of `accsim` (run, compare, check, schema, map, regress, verify), one
command module each with `add_arguments(parser)` and a handler, like the command modules
of serving/, sweep/, review/ and frontends/; cli.py lists the verbs and imports only the
module of the verb run.
`inputs` resolves the platform, workload and mapping a command names (also the way
experiments and tests load shipped inputs); the options verbs share are declared once in
simulator.options.catalog."""
