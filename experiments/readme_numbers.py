"""The numbers the documentation quotes, regenerated from the commands that print them.

A page carries a checked example as an HTML comment right before a fenced block:

    <!-- accsim-example: accsim run --arch tpu_v1 --workload resnet50_b1 -->
    ```
    resnet50_b1 on tpu_v1 (engine fast): 741,016 cycles = 1.059 ms at 0.7 GHz
    ```

The block is (an excerpt of) what the command prints: every line of it must be a line
of the command's output, in order, blank lines and `...` lines skipped (a table row
may be quoted with its last columns left out). A marker
without a command (`<!-- accsim-example -->`) takes its commands from the block's own
`$ accsim ...` lines, each followed by its output. A command must also exit as its
block shows: 1 where the block shows an `accsim: error:` or a `FAIL:` line, 0 otherwise
(the rule tests/test_docs_examples.py applies to unmarked blocks; it leaves marked ones
to this check). Commands run 400 columns wide (every
table in one piece, as with --wide) unless the marker names a width:
`<!-- accsim-example columns=80: accsim compare ... -->`. Lines are compared with runs of
spaces and table rules collapsed (a terminal's width changes padding, not figures) and
an absolute path by its file name (`.../tpu_v5e_like.yaml` quotes any checkout's);
wall-clock figures (a number before `s wall` or a rate `/s` on a line that says
`wall`, and the time and rate of the summary `accsim sweep run` prints, "computed in
15.5 s (3.9 points/s)") are not compared, since no rerun reproduces them.

A command's input may be shown on the page (one rule, `inline_file` and `named_file`,
that tests/test_docs_examples.py applies too): a trailing `# NAME.yaml: YAML` comment
on the command writes that small file before it runs, and a python or yaml block whose
first line names a file (`# my_tilers.py ...`, `# bad.yaml`) is that file for the
page's later commands. Such files are part of the command's cache key.

A figure in prose is checked the same way: one or more markers right before a paragraph,

    <!-- accsim-figures: accsim run --arch tpu_v5e_like --model llama_3_1_8b ... -->
    Decode at batch 4 takes 23.42 ms and moves 16,106 MB off chip.

say that every figure of the paragraph (a number outside `code`, not part of a name
such as fp8 or Llama-3.1-8B) is printed by one of the commands, or is one of their
arguments: a whole number exactly
(commas aside), a decimal as some printed number rounds to it at its own places. A
figure no command prints (a ratio, a wall-clock time) belongs in a paragraph without
the marker, written as a dated measurement with its command: "(measured 2026-12-06:
`python experiments/bench_llm.py`)" or "Measured 2026-12-06 with ...". A figure that is not ours to print, a published
fact (a chip's rated bandwidth, a paper's result, a trace's size) or a parameter a
reader sets or the code defines (a default, a threshold, a test's tolerance), belongs
in a paragraph that cites where it comes from: "(source: the TPU v1 paper, Jouppi et al.
2017)" or "(within 1%; source: `simulator/metrics/bottleneck.py`)"; a source that names
a path in backticks names a file of the repository (--audit lists the paragraph when the
file is gone). A table right after a paragraph ending in a colon belongs to that
paragraph: the paragraph's date or source covers it. A prompt line ending in a backslash
continues on the next.

Commands are data: only `accsim` with plain arguments is run (no shell: a pipe,
redirection or `&&` is refused), through this interpreter's `simulator.cli`, in a
scratch folder whose entries link to the repository's top level, so relative input
paths resolve and whatever a command writes stays in the scratch folder.

Run: `python experiments/readme_numbers.py` rewrites every line whose figures moved
(the line with the same words in the fresh output replaces it); `--check` changes no
file and exits 1 listing each mismatch as FILE:LINE (a prose figure is only ever
checked: it is written by hand). Default pages: README.md and docs/**/*.md; or name the
files. `--audit` runs nothing and lists the lines of prose whose figures in a unit of
measurement are neither checked, nor dated, nor sourced (CI's test run asserts there
are none). `--cache DIR` (or ACCSIM_DOCS_CACHE) keeps each command's output under a key
of its arguments, width and a digest of every file a command may read (the package, the
shipped platforms, workloads and experiments), and of the page's commands before it
(which may have written what it reads: a sweep's store, a review's packet), so a
second check of an unchanged tree
(CI's test run after its docs step) reruns nothing. `--jobs N` checks N pages at once
(default: the CPUs); a page's commands run in order, in the page's own scratch folder,
and the mismatches are listed in page order.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^\s*<!--\s*accsim-example(?:\s+columns=(?P<columns>\d+))?\s*"
                    r"(?::\s*(?P<command>.*?))?\s*-->\s*$")
# The terminal width an example runs at unless its marker names one (`columns=80`).
COLUMNS = 400
FIGURES = re.compile(r"^\s*<!--\s*accsim-figures\s*:\s*(?P<command>.*?)\s*-->\s*$")
# A figure in prose: a number not inside a name (fp8, v5e, Llama-3.1-8B, 2**20).
PROSE_FIGURE = re.compile(r"(?<![\w.\-/^*])\d[\d,]*(?:\.\d+)?(?![\w\-/^*]|\.\d)|"
                          r"(?<![\w.\-/^*])\d[\d,]*(?:\.\d+)?(?=x\b)")
CODE_SPAN = re.compile(r"`[^`]*`")
# A figure in a unit of measurement, and the words that date one (--audit).
MEASURED = re.compile(r"(?<![\w.\-/^*])\d[\d,]*(?:\.\d+)?\s*(?:ms|s|us|MB|GB|GiB|MiB|"
                      r"cycles|mJ|uJ|J|W|%|tokens/s|requests/s|passed|tests)(?![\w/])")
DATED = re.compile(r"(measured|dated measurement)[^.]*?\b20\d\d-\d\d-\d\d", re.IGNORECASE)
# A figure's citation: a publication, or the repository file that defines it (--audit).
SOURCED = re.compile(r"[(;]\s*source: (?P<source>[^)]+)\)")
# What a command's output may depend on besides its arguments (the cache's key).
INPUT_FOLDERS = ("simulator", "arch_configs", "workloads", "experiments")
CACHE_ENV = "ACCSIM_DOCS_CACHE"
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
# A table's cell separators (a quoted row may leave out the last columns).
CELL = re.compile(r"[\u2502\u2503]")
# Table rules and cell separators rich draws; padding around them varies with width.
RULES = re.compile(r"[\u2500-\u257f]+")
# Wall-clock figures: "8.0 s wall", "194,715 candidates/s" on a line that says "wall";
# the sweep summary's "in 15.5 s (3.9 points/s)" (simulator/sweep/sweep_command.py).
WALL = re.compile(r"[\d,.]+(?=\s*s wall)|[\d,.]+(?=\s*[A-Za-z ]*/s\b)|"
                  r"[\d,.]+(?= s \([\d,.]+ points/s\))")
SWEEP_TIMING = re.compile(r" computed(?: \(\d+ failed\))? in [\d.]+ s \([\d.]+ points/s\)")
# A command's input shown on the page: a trailing `# NAME.yaml: YAML` comment, and a
# python or yaml block whose first line names its file.
INLINE_FILE = re.compile(r"\s#\s*(?P<name>[\w.-]+\.ya?ml):\s*(?P<text>.+)$")
NAMED_FILE = re.compile(r"^#\s*(?P<name>[\w-]+\.(?:py|ya?ml))\b")
NAMED_LANGS = {"python", "py", "pycon", "yaml", "yml"}
LANG = re.compile(r"^\s*(?:```+|~~~+)\s*(?P<lang>[\w+-]*)")
# An absolute or elided path (`/home/x/arch_configs/a.yaml`, `.../a.yaml`): its file name.
PATH = re.compile(r"(?<!\S)(?:\.\.\.|/)[^\s:]*/(?P<name>[^/\s:]+)")
SHELL = set("|&;<>`$(){}")
PROMPT = "$ "
# A quoted line that shows its command failing (expected_exit).
SHOWN_FAILURES = ("accsim: error:", "FAIL:")
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
    files: dict[str, str] = field(default_factory=dict)  # written first: name -> text


@dataclass
class Prose:
    """A paragraph whose figures the marked commands print."""

    argvs: list[list[str]]
    line: int                   # 1-based, of the first marker
    lines: list[tuple[int, str]] = field(default_factory=list)  # (line index, text)


@dataclass(frozen=True)
class Mismatch:
    """A quoted line no output line matches."""

    file: Path
    line: int
    quoted: str
    printed: str | None   # the output line with the same words, or None

    def __str__(self) -> str:
        now = f"accsim now prints: {self.printed}" if self.printed is not None else \
            "no output line has these words" if not self.quoted.startswith("figure ") \
            else "no number the marked commands print rounds to it"
        return f"{self.file}:{self.line}: quoted: {self.quoted.strip()}\n    {now}"


@dataclass(frozen=True)
class WrongExit:
    """A command that exited otherwise than its block shows."""

    file: Path
    line: int
    argv: tuple[str, ...]
    shown: int      # the exit status the block shows (expected_exit)
    got: int | None  # None: it ran over its time

    def __str__(self) -> str:
        got = "ran over its time" if self.got is None else f"exited {self.got}"
        return (f"{self.file}:{self.line}: `accsim {shlex.join(self.argv)}` {got}; the "
                f"block shows exit {self.shown}")


def expected_exit(quoted: list[str]) -> int:
    """The exit status a block's quoted lines show: 1 with an error or a failure line,
    0 otherwise."""
    return 1 if any(line.strip().startswith(SHOWN_FAILURES) for line in quoted) else 0


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


def inline_file(command: str) -> tuple[str, str] | None:
    """The small input a command shows in a trailing `# NAME.yaml: YAML` comment, as
    (name, text), written before the command runs; None when it shows none."""
    found = INLINE_FILE.search(command)
    return (found["name"], found["text"] + "\n") if found else None


def named_file(lang: str, body: list[str]) -> tuple[str, str] | None:
    """The file a python or yaml block stands for when its first line names one
    (`# my_tilers.py ...`, `# bad.yaml`), as (name, text); None otherwise."""
    named = NAMED_FILE.match(body[0]) if body and lang.lower() in NAMED_LANGS else None
    return (named["name"], "\n".join(body) + "\n") if named else None


def write_inputs(folder: Path, files: dict[str, str]) -> None:
    """The page's files in a scratch folder, each replacing a link to the repository's
    entry of that name (never writing through it)."""
    for name, text in files.items():
        target = folder / name
        if target.is_symlink():
            target.unlink()
        target.write_text(text, encoding="utf-8")


def examples(path: Path, lines: list[str]) -> list[Run]:
    """The runs the markers of one page ask for."""
    runs = []
    files: dict[str, str] = {}  # named blocks so far
    index = 0
    while index < len(lines):
        marker = MARKER.match(lines[index])
        if not marker:
            index += _named_block(lines, index, files)
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
                                 indent, columns, files=_with_inline(files,
                                                                     marker["command"])))
        continued = False
        for at in range(start + 1, end):
            text = lines[at][len(indent):] if lines[at].startswith(indent) else \
                lines[at]
            if continued:  # the rest of a `$ accsim ... \` line
                continued = text.rstrip().endswith("\\")
                if not marker["command"]:
                    page_runs[-1].argv += command_argv(
                        "accsim " + text.rstrip().rstrip("\\"), f"{path}:{at + 1}")
                    page_runs[-1].files = _with_inline(page_runs[-1].files, text)
                continue
            if text.startswith(PROMPT):
                continued = text.rstrip().endswith("\\")
                if marker["command"]:
                    continue  # the marker's command, echoed in the block
                page_runs.append(Run(command_argv(text[len(PROMPT):].rstrip()
                                                  .rstrip("\\"), f"{path}:{at + 1}"),
                                     at + 1, indent, columns,
                                     files=_with_inline(files, text)))
            elif text.strip() and text.strip() != "..." and page_runs:
                page_runs[-1].expected.append((at, text))
            elif text.strip() and not page_runs:
                raise ExampleError(f"{path}:{at + 1}: output before any `$ accsim` line "
                                   "in a block whose marker names no command")
        runs += page_runs
        index = end + 1
    return runs


def _with_inline(files: dict[str, str], command: str) -> dict[str, str]:
    """The page's files so far, and the one a command's `# NAME.yaml:` comment shows."""
    shown = inline_file(command)
    return {**files, **({shown[0]: shown[1]} if shown else {})}


def fenced_block(lines: list[str], index: int) -> tuple[str, list[str], int] | None:
    """The fenced block opening at `index` (None where no fence opens there): its
    language, its body with the fence's indent taken off, and the index past its closing
    fence. The docs test reads pages' blocks by the same rule."""
    opened = FENCE.match(lines[index])
    if not opened:
        return None
    indent, fence = opened["indent"], opened["fence"]
    end = index + 1
    while end < len(lines) and not lines[end].strip().startswith(fence):
        end += 1
    body = [line[len(indent):] if line.startswith(indent) else line.lstrip()
            for line in lines[index + 1:end]]
    return LANG.match(lines[index])["lang"], body, end + 1


def _named_block(lines: list[str], index: int, files: dict[str, str]) -> int:
    """How many lines to step past at `index`: a whole unmarked fenced block (its file
    added to `files` where its first line names one), else one line."""
    found = fenced_block(lines, index)
    if found is None:
        return 1
    lang, body, past = found
    if named := named_file(lang, body):
        files[named[0]] = named[1]
    return past - index


def paragraphs(path: Path, lines: list[str]) -> list[Prose]:
    """The prose paragraphs the accsim-figures markers of one page check."""
    found = []
    index = 0
    while index < len(lines):
        if not FIGURES.match(lines[index]):
            index += 1
            continue
        paragraph = Prose([], index + 1)
        while index < len(lines) and (marker := FIGURES.match(lines[index])):
            paragraph.argvs.append(command_argv(marker["command"],
                                                f"{path}:{index + 1}"))
            index += 1
        while index < len(lines) and lines[index].strip():
            if FENCE.match(lines[index]):
                raise ExampleError(f"{path}:{paragraph.line}: an accsim-figures marker "
                                   "checks a paragraph of prose, not a fenced block")
            paragraph.lines.append((index, lines[index]))
            index += 1
        if not paragraph.lines:
            raise ExampleError(f"{path}:{paragraph.line}: an accsim-figures marker must "
                               "be followed by a paragraph")
        found.append(paragraph)
    return found


def figures_of(text: str) -> list[str]:
    """The figures of a line of prose (module docstring), code spans left out."""
    return PROSE_FIGURE.findall(CODE_SPAN.sub(" ", text))


def printed_numbers(printed: list[str]) -> set[Decimal]:
    return {Decimal(n.replace(",", "")) for line in printed
            for n in NUMBER.findall(line) if n.replace(",", "").strip("+-")}


def figure_printed(figure: str, numbers: set[Decimal]) -> bool:
    """Whether a printed number is the figure: equal for a whole number, rounding to it
    at its places for a decimal."""
    value = Decimal(figure.replace(",", ""))
    places = -value.as_tuple().exponent
    if places <= 0:
        return value in numbers
    half = Decimal(5) / Decimal(10) ** (places + 1)
    return any(abs(abs(n) - value) <= half for n in numbers)


def compare_prose(path: Path, paragraph: Prose,
                  outputs: list[list[str]]) -> list[Mismatch]:
    numbers = set().union(*(printed_numbers(out) for out in outputs),
                          *(printed_numbers(argv) for argv in paragraph.argvs))
    return [Mismatch(path, at + 1, f"figure {figure} in: {text.strip()}", None)
            for at, text in paragraph.lines for figure in figures_of(text)
            if not figure_printed(figure, numbers)]


def missing_sources(text: str) -> list[str]:
    """The repository paths a paragraph's "(source: ...)" names in backticks that are
    not files (a cited file renamed or removed)."""
    return [path for cited in SOURCED.finditer(text)
            for path in re.findall(r"`([^`\s]+)`", cited["source"])
            if "/" in path and not (ROOT / path).is_file()]


def accounted_for(text: str) -> bool:
    """Whether a paragraph dates its figures as a measurement or cites their source
    (every path it cites existing)."""
    return bool(DATED.search(text)) or bool(SOURCED.search(text)) and \
        not missing_sources(text)


def unchecked_figures(path: Path, lines: list[str]) -> list[str]:
    """FILE:LINE of each line of prose with a figure in a unit of measurement (ms, s,
    MB, GB, cycles, %, ...) that is neither in a checked paragraph nor in one that
    dates it ("measured 2026-12-06" or "a dated measurement, 2026-12-04") or cites its
    source ("(source: ...)"). A table right after a paragraph that ends with a colon
    (the paragraph introducing it) is dated or sourced by that paragraph."""
    checked = {at for paragraph in paragraphs(path, lines) for at, _ in paragraph.lines}
    found, fenced, paragraph = [], False, []
    introduced = [False]  # the paragraph just flushed introduces what follows, accounted

    def flush():
        if not paragraph:
            return
        text = " ".join(line for _, line in paragraph)
        accounted = accounted_for(text) or \
            (introduced[0] and paragraph[0][1].lstrip().startswith("|"))
        if not accounted:
            found.extend(f"{path}:{at + 1}: {line.strip()}" for at, line in paragraph
                         if at not in checked and MEASURED.search(CODE_SPAN.sub(" ", line)))
        introduced[0] = accounted and text.rstrip().endswith(":")
        paragraph.clear()

    for at, text in enumerate(lines):
        if FENCE.match(text):
            fenced = not fenced
            flush()
            introduced[0] = False
        elif fenced:
            continue
        elif text.strip():
            paragraph.append((at, text))
        else:
            flush()
    flush()
    return found


def normal(text: str) -> str:
    """A line as compared: table rules and runs of spaces collapsed, wall-clock masked,
    a path by its file name (`.../tpu_v5e_like.yaml`: the checkout's folder varies)."""
    timed = " wall" in text or SWEEP_TIMING.search(text)
    text = WALL.sub("#", text) if timed else text
    return " ".join(PATH.sub(r".../\g<name>", RULES.sub(" ", text)).split())


def elided(printed: str) -> str:
    """A printed line as a page quotes it: a path into this checkout by its file name."""
    return PATH.sub(r".../\g<name>", printed) if str(ROOT) in printed else printed


def shape(text: str) -> str:
    """A line's words without its figures: how a quoted line finds its fresh one."""
    return NUMBER.sub("#", normal(text))


def inputs_digest() -> str:
    """A digest of every file a command may read besides its arguments' own: the
    package, the shipped platforms, workloads and experiments, and this Python."""
    digest = hashlib.sha256(sys.version.encode())
    for folder in INPUT_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass
class Outputs:
    """Commands' outputs, kept in `cache` (a folder; None: none kept) under a key of
    the arguments, the width, the files the page shows for the command, the inputs'
    digest and the page's commands run before it in the same scratch folder (the same
    command twice may print two things: a sweep's second run finds its store)."""

    scratch: Path
    timeout_s: int
    cache: Path | None = None
    digest: str = ""
    earlier: list = field(default_factory=list)  # the commands run so far
    unrun: list = field(default_factory=list)    # of those, read from the cache

    def __call__(self, argv: list[str], columns: int,
                 files: dict[str, str] | None = None) -> Printed:
        write_inputs(self.scratch, files or {})
        if self.cache is None:
            return output(argv, self.scratch, self.timeout_s, columns)
        self.digest = self.digest or inputs_digest()
        shown = [sorted(files.items())] if files else []  # the page's input files
        before = [self.earlier] if self.earlier else []
        key = hashlib.sha256(json.dumps([argv, columns, self.digest, *shown,
                                         *before]).encode())
        self.earlier = self.earlier + [[argv, columns, *shown]]
        kept = self.cache / f"{key.hexdigest()}.json"
        if kept.is_file():
            self.unrun.append((argv, columns))
            return Printed(**json.loads(kept.read_text(encoding="utf-8")))
        for earlier_argv, earlier_columns in self.unrun:  # what they write, first
            output(earlier_argv, self.scratch, self.timeout_s, earlier_columns)
        self.unrun.clear()
        printed = output(argv, self.scratch, self.timeout_s, columns)
        if printed.status is not None:  # a command that ran over its time: run again
            self.cache.mkdir(parents=True, exist_ok=True)
            staged = kept.with_suffix(f".{os.getpid()}.tmp")
            staged.write_text(json.dumps(asdict(printed)), encoding="utf-8")
            os.replace(staged, kept)
        return printed


@dataclass(frozen=True)
class Printed:
    """What a command printed (stdout then stderr, as lines) and its exit status (None:
    it ran over its time)."""

    lines: list[str]
    status: int | None


def output(argv: list[str], scratch: Path, timeout_s: int,
           columns: int = COLUMNS) -> Printed:
    """What `accsim ARGV` prints, run in the scratch folder at `columns` wide."""
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1", "TERM": "dumb"}
    try:
        done = subprocess.run([sys.executable, "-m", "simulator.cli", *argv], cwd=scratch,
                              capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return Printed([f"(accsim {shlex.join(argv)} ran over {timeout_s} s)"], None)
    return Printed((done.stdout + done.stderr).splitlines(), done.returncode)


def cut_to(quoted: str, printed: str) -> str:
    """`printed` cut to as many cells as `quoted` has, where `quoted` is a table row
    (a row may be quoted with its last columns left out); any other line as it is."""
    if not CELL.search(quoted):
        return printed
    if CELL.match(printed.strip()) and not CELL.match(quoted.strip()):
        printed = printed.strip()[1:]  # quoted without the table's left border
    marks = [mark.start() for mark in CELL.finditer(printed)]
    cells = len(CELL.findall(quoted))
    return printed[:marks[cells]].rstrip() if len(marks) > cells else printed


def compare(path: Path, run: Run, printed: list[str]) -> list[tuple[int, Mismatch]]:
    """Each quoted line against the output, in order: (line index, mismatch)."""
    found = []
    position = 0
    for at, quoted in run.expected:
        candidates = [cut_to(quoted, line) for line in printed]
        same = next((k for k in range(position, len(printed))
                     if normal(candidates[k]) == normal(quoted)), None)
        if same is not None:
            position = same + 1
            continue
        alike = next((k for k in range(position, len(printed))
                      if shape(candidates[k]) == shape(quoted)), None)
        if alike is not None:
            position = alike + 1
        found.append((at, Mismatch(path, at + 1, quoted,
                                   elided(candidates[alike].rstrip())
                                   if alike is not None else None)))
    return found


def scratch_folder(folder: Path) -> Path:
    """A folder whose entries link to the repository's top level."""
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (folder / entry.name).symlink_to(entry)
    return folder


def check_page(path: Path, *, update: bool, timeout_s: int, cache: Path | None = None,
               digest: str = "") -> list[Mismatch | WrongExit]:
    """A page's examples and checked paragraphs rerun; with `update`, example lines
    whose figures moved rewritten in place (a wrong exit status is only ever listed).
    A paragraph's commands may exit either way: prose may quote a refusal's figures."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    stripped = [line.rstrip("\n") for line in lines]
    runs, prose = examples(path, stripped), paragraphs(path, stripped)
    mismatches = []
    with tempfile.TemporaryDirectory(prefix="accsim-readme-") as scratch:
        run_command = Outputs(scratch_folder(Path(scratch)), timeout_s, cache, digest)
        for run in runs:
            printed = run_command(run.argv, run.columns, run.files)
            shown = expected_exit([text for _, text in run.expected])
            if printed.status != shown:
                mismatches.append(WrongExit(path, run.line, tuple(run.argv), shown,
                                            printed.status))
            for at, mismatch in compare(path, run, printed.lines):
                if update and mismatch.printed is not None:
                    lines[at] = run.indent + mismatch.printed + "\n"
                else:
                    mismatches.append(mismatch)
        for paragraph in prose:
            mismatches += compare_prose(path, paragraph, [run_command(argv, COLUMNS).lines
                                                          for argv in paragraph.argvs])
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
    parser.add_argument("--audit", action="store_true", help="run nothing; list each "
                        "line of prose with a figure in a unit of measurement that no "
                        "marker checks and no date marks as a measurement")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="pages checked at once, each in its own scratch folder, "
                        "its commands in order (default: the CPUs)")
    parser.add_argument("--cache", metavar="DIR", default=os.environ.get(CACHE_ENV),
                        help=f"keep outputs here (default ${CACHE_ENV}; unset: none)")
    args = parser.parse_args(argv)
    cache = Path(args.cache) if args.cache else None
    mismatches, examples_seen, paragraphs_seen = [], 0, 0
    if args.audit:
        found = [line for page in pages(args.pages) if page.is_file()
                 for line in unchecked_figures(page, page.read_text(
                     encoding="utf-8").splitlines())]
        print("\n".join(found + [f"{len(found)} lines of prose with figures neither "
                                  "checked nor dated"]))
        return 0
    checked = [page for page in pages(args.pages) if page.is_file()]
    try:
        for page in checked:  # every marker parsed before anything runs
            lines = page.read_text(encoding="utf-8").splitlines()
            examples_seen += len(examples(page, lines))
            paragraphs_seen += len(paragraphs(page, lines))
    except ExampleError as exc:
        print(f"readme_numbers: {exc}", file=sys.stderr)
        return 2
    digest = inputs_digest() if cache else ""
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for found in pool.map(lambda page: check_page(
                page, update=not args.check, timeout_s=args.timeout, cache=cache,
                digest=digest), checked):
            mismatches += found
    for mismatch in mismatches:
        print(mismatch)
    wrong_exits = sum(isinstance(found, WrongExit) for found in mismatches)
    verb = "differ" if args.check else "could not be regenerated"
    print(f"{paragraphs_seen} paragraphs of prose figures checked")
    print(f"{examples_seen} example commands; {len(mismatches) - wrong_exits} quoted "
          f"lines {verb}; {wrong_exits} commands exited otherwise than shown")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
