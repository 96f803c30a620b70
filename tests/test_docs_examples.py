"""Every code example in the documentation runs (issue 29): each fenced block of
README.md and docs/**/*.md that holds something to run is one test case, PAGE:LINE.

What runs:
- ```python blocks, in page order: a block runs in a fresh interpreter after the page's
  earlier python blocks (so it sees their names), or alone where it binds every name it
  uses (its own imports); a block of `>>>` lines is a doctest
  whose shown outputs must match.
- A python or yaml block whose first line is a comment naming a file (`# my_tilers.py
  ...`, `# bad.yaml`) is written under that name for the page's later shell blocks.
- shell blocks (no language, sh, bash, console, shell, or text): a `$ ` line is a command and the
  lines under it are its output; in a block without prompts every line that starts with
  `accsim ` or `python ` is a command. `pip install` lines are skipped; other programs
  (`head`, `dask`) are shown, not run.
- A block under an `<!-- accsim-example ... -->` marker is left to
  experiments/readme_numbers.py, which runs its commands (accsim ones only), compares
  the lines it quotes and holds each command to the exit status rule below. CI runs it
  before the tests, and tests/test_docs_figures.py runs it within them.
- yaml blocks must parse.

How: a command is plain arguments (a pipe, redirection or `&&` fails the case: one
command per line); `accsim` runs as `python -m simulator.cli` and `python` as this
interpreter, in a fresh scratch folder whose entries link to the repository's top level
(so `workloads/...` and `experiments/...` resolve) and where whatever a command writes
stays. A trailing `# NAME.yaml: YAML` comment writes that small input first (the docs'
way to show one inline). A command whose shown output has an `accsim: error:` line must
exit 1 and print that line (a path compared by its file name); one whose output shows
`FAIL:` must exit 1; any other must exit 0.

A block opts out only with `<!-- not-run: REASON -->` just before it, REASON saying why.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import shlex
import subprocess
import symtable
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from timed_cli import HANG_S, cpu_limit

# The docs check's rule for a command's input shown on the page, shared so that both
# write the same files.
from experiments.readme_numbers import (MARKER, expected_exit, fenced_block, inline_file,
                                        named_file, write_inputs)

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md",
         *sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)]
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
COMMENT = re.compile(r"^\s*<!--(?P<body>.*?)-->\s*$")
NOT_RUN = re.compile(r"^\s*not-run\s*:?(?P<reason>.*?)\s*$")
SHELL_LANGS = {"", "sh", "bash", "console", "shell", "shell-session"}
PYTHON_LANGS = {"python", "py", "pycon"}
SHELL_SYNTAX = set("|&;<>`$(){}")
# An absolute or elided path (`/home/x/arch_configs/a.yaml`, `.../a.yaml`): its file name.
PATH = re.compile(r"(?<!\S)(?:\.\.\.|/)[^\s:]*/(?P<name>[^/\s:]+)")
# Each command's CPU seconds (timed_cli.cpu_limit); the wall limit only ends a hang: a
# plan-deployment example ran past a 300 s wall limit at load 27 on 2 cores.
CPU_S = 300
WALL_S = 4 * HANG_S


@dataclass
class Block:
    """One fenced block: where it is, its language, its lines (indent removed) and the
    markers just before it."""

    page: Path
    line: int                      # 1-based, of the opening fence
    lang: str
    lines: list[str]
    marked: bool = False           # under an accsim-example marker (not a case here)
    not_run: str | None = None     # an opt-out's reason

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Command:
    """One command of a shell block and the output lines the block shows for it."""

    text: str
    line: int
    output: list[str] = field(default_factory=list)


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks of one page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        found = fenced_block(lines, index)
        if found is None:
            index += 1
            continue
        lang, body, past = found
        block = Block(page, index + 1, lang.lower(), body)
        _read_markers(block, lines, index)
        blocks.append(block)
        index = past
    return blocks


def _read_markers(block: Block, lines: list[str], index: int) -> None:
    """The HTML comments right above a fence (blank lines between allowed)."""
    above = index - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    while above >= 0 and (comment := COMMENT.match(lines[above])):
        if MARKER.match(lines[above]):
            block.marked = True
        elif skip := NOT_RUN.match(comment["body"]):
            block.not_run = skip["reason"].lstrip(":").strip()
        above -= 1


def joined(lines: list[str]) -> list[tuple[int, str]]:
    """(index, line) with backslash continuations joined."""
    out, pending, start = [], "", 0
    for at, line in enumerate(lines):
        if not pending:
            start = at
        if line.rstrip().endswith("\\"):
            pending += (line.lstrip() if pending else line).rstrip()[:-1].rstrip() + " "
            continue
        out.append((start, pending + (line.lstrip() if pending else line)))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def shell_commands(block: Block) -> list[Command]:
    """The commands a shell block shows, each with the output lines under it."""
    lines = joined(block.lines)
    prompted = any(text.startswith("$ ") for _, text in lines)
    commands: list[Command] = []
    for at, text in lines:
        if prompted:
            if text.startswith("$ "):
                commands.append(Command(text[2:].strip(), block.line + 1 + at))
            elif commands:
                commands[-1].output.append(text)
        elif text.startswith(("accsim ", "python ")):
            commands.append(Command(text.strip(), block.line + 1 + at))
    return commands


def runnable(command: Command) -> bool:
    words = command.text.split()
    return bool(words) and words[0] in ("accsim", "python") and "pip install" not in \
        command.text


def cases() -> list[Block]:
    """Every block with something to run or parse, in page order."""
    found = []
    for page in PAGES:
        for block in page_blocks(page):
            if block.lang in PYTHON_LANGS or block.lang in ("yaml", "yml"):
                found.append(block)
            elif block.lang in SHELL_LANGS | {"text"} and not block.marked and any(
                    map(runnable, shell_commands(block))):
                found.append(block)
    return found


CASES = cases()

# The LLM serving and deployment pages hold most of the examples' time; their cases run
# from test_docs_examples_serving.py, so that pytest-xdist (--dist loadfile) can give the
# two halves to two workers. A page stays whole in one file (its blocks share state).
SERVING_PAGES = frozenset(("llm.md", "plan-deployment.md"))


def page_cases(serving: bool) -> list[Block]:
    """The cases of the serving pages (serving=True) or of every other page."""
    return [block for block in CASES if (block.page.name in SERVING_PAGES) == serving]


def scratch(folder: Path) -> Path:
    """A folder whose entries link to the repository's top level."""
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (folder / entry.name).symlink_to(entry)
    return folder


def environment(folder: Path) -> dict:
    return {**os.environ, "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb",
            "MPLBACKEND": "Agg", "XDG_CACHE_HOME": str(folder / ".cache")}


def argv(command: Command, where: str) -> list[str]:
    """The command as arguments for this interpreter (no shell)."""
    words = shlex.split(command.text, comments=True)
    bad = [w for w in words if SHELL_SYNTAX & set(w)]
    assert not bad, f"{where}: {bad[0]!r} is shell syntax; show one plain command a line"
    if words[0] == "accsim":
        return [sys.executable, "-m", "simulator.cli", *words[1:]]
    return [sys.executable, *words[1:]]


def same_words(line: str) -> str:
    """A line as compared: runs of spaces collapsed and a path by its file name (the
    page's `.../tpu_v5e_like.yaml` for the checkout's absolute path), as
    experiments/readme_numbers.py compares them."""
    return " ".join(PATH.sub(r".../\g<name>", line).split())


def run_shell(block: Block, folder: Path) -> None:
    write_inputs(folder, dict(filter(None, (named_file(earlier.lang, earlier.lines)
                                            for earlier in page_blocks(block.page)
                                            if earlier.line < block.line))))
    for command in filter(runnable, shell_commands(block)):
        where = f"{block.page.relative_to(ROOT)}:{command.line}"
        write_inputs(folder, dict(filter(None, [inline_file(command.text)])))
        done = subprocess.run(argv(command, where), cwd=folder, capture_output=True,
                              text=True, timeout=WALL_S, env=environment(folder),
                              preexec_fn=cpu_limit(CPU_S))
        shown = [line.strip() for line in command.output]
        errors = [line for line in shown if line.startswith("accsim: error:")]
        expected = expected_exit(shown)  # the docs check's rule for marked blocks
        assert done.returncode == expected, (
            f"{where}: `{command.text}` exited {done.returncode}, the page shows "
            f"{expected}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        printed = {same_words(line) for line in done.stderr.splitlines()}
        for error in errors:
            assert same_words(error) in printed, (
                f"{where}: the page shows\n{error}\nthe command printed\n{done.stderr}")


DRIVER = """\
import doctest, json, sys
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
names = {"__name__": "__main__"}
for index, (where, source) in enumerate(blocks):
    if source.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(source, names, where, where, 0)
        runner = doctest.DocTestRunner(
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test, clear_globs=False)
        if runner.failures:
            sys.exit(f"{where}: {runner.failures} example(s) printed something else")
    else:
        exec(compile(source, where, "exec"), names)
"""


def stands_alone(source: str) -> bool:
    """Whether a (non-doctest) block binds every name it uses that is not a builtin:
    then it needs none of the page's earlier blocks."""
    if source.lstrip().startswith(">>>"):
        return False
    table = symtable.symtable(source, "block", "exec")
    return all(symbol.is_assigned() or symbol.is_imported()
               or hasattr(builtins, symbol.get_name())
               for symbol in table.get_symbols() if symbol.is_referenced())


def run_python(block: Block, folder: Path) -> None:
    page = [b for b in page_blocks(block.page)
            if b.lang in PYTHON_LANGS and b.line <= block.line and b.not_run is None]
    if stands_alone("\n".join(block.lines) + "\n"):
        page = [block]
    (folder / "blocks.json").write_text(json.dumps(
        [[b.name, "\n".join(b.lines) + "\n"] for b in page]))
    (folder / "driver.py").write_text(DRIVER)
    done = subprocess.run([sys.executable, "driver.py", "blocks.json"], cwd=folder,
                          capture_output=True, text=True, timeout=WALL_S,
                          env=environment(folder), preexec_fn=cpu_limit(CPU_S))
    assert done.returncode == 0, f"{block.name}\n{done.stdout[-4000:]}\n" \
                                 f"{done.stderr[-4000:]}"


OTHER_CASES = page_cases(serving=False)


@pytest.mark.parametrize("block", OTHER_CASES, ids=[b.name for b in OTHER_CASES])
def test_the_example_runs(block, tmp_path):
    run_example(block, tmp_path)


def run_example(block: Block, tmp_path: Path) -> None:
    """Run one case as the module docstring says (or parse it, or skip it with its
    not-run reason)."""
    if block.not_run is not None:
        assert block.not_run, f"{block.name}: a not-run marker must say why"
        pytest.skip(f"not run: {block.not_run}")
    if block.lang in ("yaml", "yml"):
        yaml.safe_load("\n".join(block.lines))
        return
    folder = scratch(tmp_path)
    if block.lang == "text":
        pytest.fail(f"{block.name}: a text block of commands runs as a shell block or "
                    "says why not (<!-- not-run: REASON -->)")
    if block.lang in PYTHON_LANGS:
        run_python(block, folder)
    else:
        run_shell(block, folder)


def test_the_collector_sees_the_pages_examples():
    """The scan finds the docs' examples at all (a broken fence pattern would pass
    vacuously), and each opt-out says why."""
    names = [b.name for b in CASES]
    assert any(n.startswith("docs/howto/python-api.md") for n in names)
    marked = [b for page in PAGES for b in page_blocks(page) if b.marked]
    assert len(marked) >= 10 and not any(b.marked for b in CASES)
    assert sum(b.lang in SHELL_LANGS for b in CASES) >= 10
    assert all(b.not_run for b in CASES if b.not_run is not None)


INDENTED_COMMAND = re.compile(r"^ {4}(\$ |accsim |python )")


def test_no_command_hides_in_an_indented_code_block():
    """An indented code block is not collected above: commands go in fenced blocks."""
    hidden = []
    for page in PAGES:
        fenced, previous = False, ""
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and not previous.strip() and INDENTED_COMMAND.match(line):
                hidden.append(f"{page.relative_to(ROOT)}:{number}")
            previous = line
    assert hidden == []


def test_the_parser_reads_prompts_outputs_markers_and_continuations(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n<!-- not-run: needs a cluster -->\n\n```\n$ accsim run \\\n"
                    "  --arch tpu_v1\nresnet50_b1 on tpu_v1\n$ head x\n```\n"
                    "- item\n\n  ```\n  accsim map   # m.yaml: {a: 1}\n  pip install x\n"
                    "  ```\n<!-- accsim-example columns=80: accsim run -->\n```\nx\n```\n")
    first, second, third = page_blocks(page)
    assert (first.marked, second.marked, third.marked) == (False, False, True)
    assert first.not_run == "needs a cluster" and first.line == 4
    commands = shell_commands(first)
    assert [c.text for c in commands] == ["accsim run --arch tpu_v1", "head x"]
    assert commands[0].output == ["resnet50_b1 on tpu_v1"] and commands[0].line == 5
    assert [runnable(c) for c in commands] == [True, False]
    assert [c.text for c in shell_commands(second)] == ["accsim map   # m.yaml: {a: 1}"]
    assert inline_file(shell_commands(second)[0].text) == ("m.yaml", "{a: 1}\n")


def test_a_block_runs_alone_only_where_it_binds_every_name_it_uses():
    assert stands_alone("import simulator.api as accsim\nprint(accsim.simulate)\n")
    assert not stands_alone("print(accsim.simulate)\n")        # an earlier block's name
    assert not stands_alone(">>> import simulator\n")          # a doctest: page order
