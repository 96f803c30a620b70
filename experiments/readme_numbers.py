"""The numbers the documentation quotes, regenerated from the commands that print them.

A page carries a checked example as an HTML comment right before a fenced block:

    <!-- accsim-example: accsim run --arch tpu_v1 --workload resnet50_b1 -->
    ```
    resnet50_b1 on tpu_v1 (engine fast): 741,016 cycles = 1.059 ms at 0.7 GHz
    ```

The block is (an excerpt of) what the command prints: every line of it must be a line
of the command's output, in order, blank lines and `...` lines skipped. A marker
without a command (`<!-- accsim-example -->`) takes its commands from the block's own
`$ accsim ...` lines, each followed by its output. Commands run 400 columns wide (every
table in one piece, as with --wide) unless the marker names a width:
`<!-- accsim-example columns=80: accsim compare ... -->`. Lines are compared with runs of
spaces and table rules collapsed (a terminal's width changes padding, not figures);
wall-clock figures (a number before `s wall` or a rate `/s` on a line that says
`wall`) are not compared, since no rerun reproduces them.

Commands are data: only `accsim` with plain arguments is run (no shell: a pipe,
redirection or `&&` is refused), through this interpreter's `simulator.cli`, in a
scratch folder whose entries link to the repository's top level, so relative input
paths resolve and whatever a command writes stays in the scratch folder.

Run: `python experiments/readme_numbers.py` rewrites every line whose figures moved
(the line with the same words in the fresh output replaces it); `--check` changes no
file and exits 1 listing each mismatch as FILE:LINE. Default pages: README.md and
docs/**/*.md; or name the files.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^\s*<!--\s*accsim-example(?:\s+columns=(?P<columns>\d+))?\s*"
                    r"(?::\s*(?P<command>.*?))?\s*-->\s*$")
# The terminal width an example runs at unless its marker names one (`columns=80`).
COLUMNS = 400
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
# Table rules and cell separators rich draws; padding around them varies with width.
RULES = re.compile(r"[\u2500-\u257f]+")
# Wall-clock figures: "8.0 s wall", "194,715 candidates/s" on a line that says "wall".
WALL = re.compile(r"[\d,.]+(?=\s*s wall)|[\d,.]+(?=\s*[A-Za-z ]*/s\b)")
SHELL = set("|&;<>`$(){}")
PROMPT = "$ "
TIMEOUT_S = 600


class ExampleError(Exception):
    """A marker or block that cannot be checked: FILE:LINE and why."""


@dataclass
class Run:
    """One command of an example and the block lines that quote its output."""

    argv: list[str]
    line: int                   # 1-based, of the marker or the prompt
    indent: str = ""            # the block's (a fence inside a list item is indented)
    columns: int = COLUMNS      # the terminal width it runs at
    expected: list[tuple[int, str]] = field(default_factory=list)  # (line index, text)


@dataclass(frozen=True)
class Mismatch:
    file: Path
    line: int
    quoted: str
    printed: str | None   # the output line with the same words, or None

    def __str__(self) -> str:
        now = f"accsim now prints: {self.printed}" if self.printed is not None else \
            "no output line has these words"
        return f"{self.file}:{self.line}: quoted: {self.quoted.strip()}\n    {now}"


def command_argv(text: str, where: str) -> list[str]:
    """The arguments of a plain `accsim ...` command (a trailing # comment dropped)."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise ExampleError(f"{where}: cannot parse the command ({exc})") from None
    if not words or words[0] != "accsim":
        raise ExampleError(f"{where}: only `accsim ...` commands are checked, found "
                           f"{text.strip()!r}")
    bad = [w for w in words if SHELL & set(w)]
    if bad:
        raise ExampleError(f"{where}: {bad[0]!r} is shell syntax; an example is one "
                           "plain accsim command")
    return words[1:]


def examples(path: Path, lines: list[str]) -> list[Run]:
    """The runs the markers of one page ask for."""
    runs = []
    index = 0
    while index < len(lines):
        marker = MARKER.match(lines[index])
        if not marker:
            index += 1
            continue
        where = f"{path}:{index + 1}"
        start = index + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        opened = FENCE.match(lines[start]) if start < len(lines) else None
        if not opened:
            raise ExampleError(f"{where}: an accsim-example marker must be followed by "
                               "a fenced block")
        indent, fence = opened["indent"], opened["fence"]
        end = start + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if end == len(lines):
            raise ExampleError(f"{path}:{start + 1}: the fenced block is never closed")
        page_runs = []
        columns = int(marker["columns"] or COLUMNS)
        if marker["command"]:
            page_runs.append(Run(command_argv(marker["command"], where), index + 1,
                                 indent, columns))
        for at in range(start + 1, end):
            text = lines[at][len(indent):] if lines[at].startswith(indent) else \
                lines[at]
            if text.startswith(PROMPT):
                if marker["command"]:
                    continue  # the marker's command, echoed in the block
                page_runs.append(Run(command_argv(text[len(PROMPT):], f"{path}:{at + 1}"),
                                     at + 1, indent, columns))
            elif text.strip() and text.strip() != "..." and page_runs:
                page_runs[-1].expected.append((at, text))
            elif text.strip() and not page_runs:
                raise ExampleError(f"{path}:{at + 1}: output before any `$ accsim` line "
                                   "in a block whose marker names no command")
        runs += page_runs
        index = end + 1
    return runs


def normal(text: str) -> str:
    """A line as compared: table rules and runs of spaces collapsed, wall-clock masked."""
    text = text if " wall" not in text else WALL.sub("#", text)
    return " ".join(RULES.sub(" ", text).split())


def shape(text: str) -> str:
    """A line's words without its figures: how a quoted line finds its fresh one."""
    return NUMBER.sub("#", normal(text))


def output(argv: list[str], scratch: Path, timeout_s: int,
           columns: int = COLUMNS) -> list[str]:
    """What `accsim ARGV` prints (stdout then stderr), run in the scratch folder at
    `columns` wide."""
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "dumb"}
    try:
        done = subprocess.run([sys.executable, "-m", "simulator.cli", *argv], cwd=scratch,
                              capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return [f"(accsim {shlex.join(argv)} ran over {timeout_s} s)"]
    return (done.stdout + done.stderr).splitlines()


def compare(path: Path, run: Run, printed: list[str]) -> list[tuple[int, Mismatch]]:
    """Each quoted line against the output, in order: (line index, mismatch)."""
    found = []
    lines = [normal(p) for p in printed]
    shapes = [shape(p) for p in printed]
    position = 0
    for at, quoted in run.expected:
        same = next((k for k in range(position, len(lines)) if lines[k] == normal(quoted)),
                    None)
        if same is not None:
            position = same + 1
            continue
        alike = next((k for k in range(position, len(lines))
                      if shapes[k] == shape(quoted)), None)
        if alike is not None:
            position = alike + 1
        found.append((at, Mismatch(path, at + 1, quoted,
                                   printed[alike].rstrip() if alike is not None else None)))
    return found


def scratch_folder(folder: Path) -> Path:
    """A folder whose entries link to the repository's top level."""
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (folder / entry.name).symlink_to(entry)
    return folder


def check_page(path: Path, *, update: bool, timeout_s: int) -> list[Mismatch]:
    """A page's examples rerun; with `update`, figures that moved rewritten in place."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    runs = examples(path, [line.rstrip("\n") for line in lines])
    mismatches = []
    with tempfile.TemporaryDirectory(prefix="accsim-readme-") as scratch:
        folder = scratch_folder(Path(scratch))
        for run in runs:
            for at, mismatch in compare(path, run, output(run.argv, folder, timeout_s,
                                                      run.columns)):
                if update and mismatch.printed is not None:
                    lines[at] = run.indent + mismatch.printed + "\n"
                else:
                    mismatches.append(mismatch)
    if update and "".join(lines) != text:
        path.write_text("".join(lines), encoding="utf-8")
    return mismatches


def pages(named: list[str]) -> list[Path]:
    if named:
        return [Path(p) for p in named]
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="markdown files (default: README.md "
                        "and docs/**/*.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 "
                        "listing every quoted line the commands no longer print")
    parser.add_argument("--timeout", type=int, default=TIMEOUT_S, metavar="S",
                        help=f"per command (default {TIMEOUT_S} s)")
    args = parser.parse_args(argv)
    mismatches, examples_seen = [], 0
    try:
        for page in pages(args.pages):
            if not page.is_file():
                continue
            lines = page.read_text(encoding="utf-8").splitlines()
            examples_seen += len(examples(page, lines))
            mismatches += check_page(page, update=not args.check, timeout_s=args.timeout)
    except ExampleError as exc:
        print(f"readme_numbers: {exc}", file=sys.stderr)
        return 2
    for mismatch in mismatches:
        print(mismatch)
    verb = "differ" if args.check else "could not be regenerated"
    print(f"{examples_seen} example commands; {len(mismatches)} quoted lines {verb}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
