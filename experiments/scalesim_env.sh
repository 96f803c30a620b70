#!/usr/bin/env bash
# Build the separate environment that runs SCALE-Sim v3 beside accsim, for
# experiments/validate_scalesim.py and tests/test_scalesim_property.py.
#
# SCALE-Sim 3.0.0 fails under NumPy 2.4 (a TypeError in every run), so the `validate`
# extra pins numpy<2.4; accsim itself is installed here too (editable) so that one
# process can call both. This environment is separate from accsim's own .venv.
#
#   bash experiments/scalesim_env.sh            # creates .venv-scalesim/ (gitignored)
#   VENV=/some/where bash experiments/scalesim_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv-scalesim}"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e '.[validate,test]'
"$venv/bin/python" - <<'PY'
import numpy, scalesim.compute.systolic_compute_os, simulator
print(f"ready: numpy {numpy.__version__}, scalesim 3.0.0, accsim {simulator.__version__}")
PY
