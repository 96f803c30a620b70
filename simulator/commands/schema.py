"""`accsim schema KIND`: the JSON Schema of an input kind, for editors and validators."""

from __future__ import annotations

import argparse
import json

from simulator.inputs.named_inputs import SCHEMAS


def handle(args: argparse.Namespace) -> int:
    print(json.dumps(SCHEMAS[args.kind].model_json_schema(), indent=2))
    return 0


def add_arguments(schema: argparse.ArgumentParser) -> None:
    schema.add_argument("kind", choices=sorted(SCHEMAS))
    schema.set_defaults(handler=handle)
