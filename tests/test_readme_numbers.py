"""experiments/readme_numbers.py on a page of its own (issue 23 item 8): the figures a
marked example quotes are compared with a fresh run of its command; --check exits 1
naming the line that moved, a run without it rewrites that line, wall-clock figures
are not compared, and a marker that is not a plain accsim command is refused. Issue 42:
the figures of a paragraph of prose under an accsim-figures marker are checked too, and
a cache keeps the outputs of an unchanged tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "readme_numbers.py"
GEMM = """\
name: small_gemm
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 32, n: 32, k: 64}
"""


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The command, and the summary lines it prints (taken from a real run)."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "g.yaml").write_text(GEMM)
    command = (f"accsim run --arch edge_32x32 --workload {folder / 'g.yaml'} "
               "--heuristic array_aligned")
    printed = subprocess.run([sys.executable, "-m", "simulator.cli", *command.split()[1:]],
                             capture_output=True, text=True, timeout=300).stdout
    cycles = next(line for line in printed.splitlines() if " cycles = " in line)
    energy = next(line for line in printed.splitlines() if line.startswith("energy "))
    wall = next(line for line in printed.splitlines() if " s wall" in line)
    return folder, command, cycles, energy, wall


def page(folder: Path, text: str) -> Path:
    path = folder / "page.md"
    path.write_text(text)
    return path


def test_a_page_quoting_what_the_command_prints_passes(example):
    folder, command, cycles, energy, wall = example
    # The wall-clock figure is quoted wrong on purpose: it is never compared.
    path = page(folder, f"Intro.\n\n<!-- accsim-example: {command} -->\n```\n"
                f"$ {command}\n{cycles}\n...\n{energy}\n"
                f"{wall.replace(' s wall', '9 s wall')}\n```\n")
    done = script("--check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 example commands; 0 quoted lines differ" in done.stdout


def test_a_moved_figure_fails_the_check_and_is_regenerated(example):
    folder, command, cycles, energy, _ = example
    wrong = cycles.replace(" cycles", "1 cycles", 1)  # one more digit: a figure moved
    assert wrong != cycles
    text = f"<!-- accsim-example -->\n  ```\n  $ {command}\n  {wrong}\n  {energy}\n  ```\n"
    path = page(folder, text)
    done = script("--check", str(path))
    assert done.returncode == 1
    assert f"{path}:4: quoted: {wrong}" in done.stdout
    assert f"accsim now prints: {cycles}" in done.stdout
    assert path.read_text() == text  # --check changes nothing
    assert script(str(path)).returncode == 0  # regenerate
    assert path.read_text() == text.replace(wrong, cycles)
    assert script("--check", str(path)).returncode == 0


def test_a_line_the_command_never_prints_is_listed(example):
    folder, command, *_ = example
    path = page(folder, f"<!-- accsim-example: {command} -->\n```\n"
                "a line accsim never prints 42\n```\n")
    done = script("--check", str(path))
    assert done.returncode == 1 and "no output line has these words" in done.stdout


REFUSED = "accsim run --max-memory 10K"  # refused at once, with one error line


def test_a_command_must_exit_as_its_block_shows(tmp_path):
    """A block that shows an `accsim: error:` line passes only where its command exits 1;
    a block that shows none fails where the command exits 1, even with every quoted
    line printed (the rule tests/test_docs_examples.py leaves marked blocks to)."""
    refusal = subprocess.run([sys.executable, "-m", "simulator.cli", *REFUSED.split()[1:]],
                             capture_output=True, text=True, timeout=300)
    assert refusal.returncode == 1
    error = next(line for line in refusal.stderr.splitlines()
                 if line.startswith("accsim: error:"))
    shown = page(tmp_path, f"<!-- accsim-example -->\n```\n$ {REFUSED}\n{error}\n```\n")
    done = script("--check", str(shown))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 commands exited otherwise than shown" in done.stdout
    quiet = page(tmp_path, f"<!-- accsim-example -->\n```\n$ {REFUSED}\n...\n```\n")
    done = script("--check", str(quiet))
    assert done.returncode == 1
    assert f"{quiet}:3: `{REFUSED}` exited 1; the block shows exit 0" in done.stdout
    assert "0 quoted lines differ; 1 commands exited otherwise than shown" in done.stdout


@pytest.mark.parametrize("marker, problem", [
    ("<!-- accsim-example: rm -rf / -->\n```\nx\n```\n", "only `accsim ...` commands"),
    ("<!-- accsim-example: accsim run > out.txt -->\n```\nx\n```\n", "shell syntax"),
    ("<!-- accsim-example: accsim run -->\nno block here\n", "followed by a fenced"),
    ("<!-- accsim-example: accsim run -->\n```\nnever closed\n", "never closed"),
])
def test_a_bad_marker_is_one_error_naming_the_line(tmp_path, marker, problem):
    path = page(tmp_path, "# Title\n\n" + marker)
    done = script("--check", str(path))
    assert done.returncode == 2
    assert f"{path}:" in done.stderr and problem in done.stderr


def _figure(line: str, before: str) -> str:
    """The number right before `before` in a printed line ("1,234 cycles")."""
    return line.split(before)[0].split()[-1]


def test_a_prose_figure_is_checked_and_a_moved_one_fails(example):
    """An accsim-figures marker checks the paragraph after it: every figure is a
    number the command prints (a decimal at its own places); one that moved fails the
    check naming the line, and names, code spans and `2**20` are not figures."""
    folder, command, cycles, energy, _ = example
    count, pj = _figure(cycles, " cycles = "), _figure(energy, " pJ per MAC")
    shorter = f"{float(pj):.1f}"
    good = (f"# Page\n\n<!-- accsim-figures: {command} -->\nThe gemm takes {count} "
            f"cycles and {shorter} pJ per MAC on\nedge_32x32 with `--tm 7` in fp8, like "
            "Llama-3.1-8B at 2**20.\n")
    path = page(folder, good)
    done = script("--check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 paragraphs of prose figures checked" in done.stdout
    moved = f"{float(shorter) + 3.3:.1f}"
    path.write_text(good.replace(f"and {shorter} pJ", f"and {moved} pJ"))
    done = script("--check", str(path))
    assert done.returncode == 1, done.stdout
    assert f"{path}:4: quoted: figure {moved} in:" in done.stdout
    assert "no number the marked commands print rounds to it" in done.stdout
    done = script(str(path))  # a prose figure is written by hand: never rewritten
    assert done.returncode == 1 and f"and {moved} pJ" in path.read_text()


def test_a_prompt_line_continues_after_a_backslash(example):
    folder, command, cycles, *_ = example
    head, tail = command.rsplit(" --heuristic ", 1)
    path = page(folder, f"<!-- accsim-example -->\n```\n$ {head} \\\n    --heuristic "
                f"{tail}\n{cycles}\n```\n")
    done = script("--check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_cache_reruns_nothing_for_an_unchanged_tree(example, tmp_path):
    """A second check with the same --cache reads the outputs kept by the first (a kept
    output edited by hand is what the second check compares with)."""
    folder, command, cycles, *_ = example
    path = page(folder, f"<!-- accsim-example: {command} -->\n```\n{cycles}\n```\n")
    cache = tmp_path / "cache"
    assert script("--check", "--cache", str(cache), str(path)).returncode == 0
    kept, = cache.glob("*.json")
    printed = json.loads(kept.read_text())
    assert printed["status"] == 0
    kept.write_text(json.dumps({**printed, "lines": [
        line.replace(" cycles = ", "1 cycles = ") for line in printed["lines"]]}))
    done = script("--check", "--cache", str(cache), str(path))
    assert done.returncode == 1 and f"{path}:3: quoted: {cycles}" in done.stdout


def test_the_audit_lists_figures_neither_checked_nor_dated(tmp_path):
    """--audit runs nothing: a measured figure in plain prose is listed, one in a
    paragraph that dates it or under an accsim-figures marker is not."""
    path = page(tmp_path, "# Page\n\nThe run took 3.5 s on a busy machine.\n\n"
                "The run took 4.5 s (measured 2026-12-06 with `accsim run`).\n\n"
                "<!-- accsim-figures: accsim run -->\nIt takes 1.059 ms.\n\n"
                "```\n9 ms in a block\n```\n")
    done = script("--audit", str(path))
    assert done.returncode == 0
    assert f"{path}:3: The run took 3.5 s" in done.stdout
    assert "4.5 s" not in done.stdout and "1.059" not in done.stdout
    assert "9 ms" not in done.stdout
    assert "1 lines of prose with figures neither checked nor dated" in done.stdout


def test_a_cited_source_accounts_for_a_figure_while_its_file_exists(tmp_path):
    """A paragraph citing "(source: ...)" is not listed; one whose cited repository
    path is not a file is."""
    path = page(tmp_path, "# Page\n\nThe chip streams at 34 GB/s (source: the TPU v1 "
                "paper, Jouppi et al. 2017).\n\nBusy >= 80% (source: "
                "`simulator/metrics/bottleneck.py`).\n\nIdle >= 40% (source: "
                "`simulator/no_such_module.py`).\n")
    done = script("--audit", str(path))
    assert done.returncode == 0
    assert "34 GB/s" not in done.stdout and "80%" not in done.stdout
    assert f"{path}:7: Idle >= 40%" in done.stdout


def test_every_figure_of_the_shipped_docs_is_checked_dated_or_sourced():
    """--audit over README.md and docs/ (static: nothing runs) lists no line."""
    done = script("--audit")
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1].startswith("0 lines of prose"), done.stdout[-3000:]


def test_a_table_is_dated_by_the_paragraph_that_introduces_it(tmp_path):
    """A table right after a dated paragraph ending in a colon is accounted for; the
    same table after a paragraph that does not introduce it is listed."""
    table = "| run | wall |\n|---|---|\n| one | 3.5 s |\n"
    path = page(tmp_path, "# Page\n\nMeasured (measured 2026-12-06 with `accsim run`):"
                f"\n\n{table}\nA sentence.\n\n{table}")
    done = script("--audit", str(path))
    assert done.stdout.count("| one | 3.5 s |") == 1
    assert f"{path}:13: | one | 3.5 s |" in done.stdout


def test_a_path_is_compared_by_its_file_name(tmp_path):
    """An error line quoting `.../bad.yaml` matches the absolute path the command
    prints; a moved figure on that line still fails."""
    (tmp_path / "bad.yaml").write_text("name: bad\noperators:\n  - {name: g, layer_type: "
                                       "fc, kind: gemm, m: 32, n: 32, k: -1}\n")
    command = f"accsim run --arch edge_32x32 --workload {tmp_path / 'bad.yaml'}"
    line = "accsim: error: .../bad.yaml: operators[0](g).k: Input should be greater than {}"
    good = page(tmp_path, f"<!-- accsim-example: {command} -->\n```\n{line.format(0)}\n```\n")
    assert script("--check", str(good)).returncode == 0
    moved = page(tmp_path, f"<!-- accsim-example: {command} -->\n```\n{line.format(1)}\n```\n")
    done = script("--check", str(moved))
    assert done.returncode == 1 and f"{moved}:3: quoted: {line.format(1)}" in done.stdout


def test_pages_checked_at_once_list_their_mismatches_in_page_order(example, tmp_path):
    """--jobs 2 over two pages with a moved figure each: both listed, first page first."""
    folder, command, cycles, *_ = example
    moved = cycles.replace(" cycles = ", "1 cycles = ")
    text = f"<!-- accsim-example: {command} -->\n```\n{moved}\n```\n"
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text(text)
    second.write_text(text)
    done = script("--check", "--jobs", "2", str(first), str(second))
    assert done.returncode == 1
    assert done.stdout.index(f"{first}:3:") < done.stdout.index(f"{second}:3:")
    assert "2 example commands; 2 quoted lines differ" in done.stdout


def test_a_sentence_may_open_with_its_date(tmp_path):
    """"Measured 2026-12-06 on ..." dates its paragraph as "(measured 2026-12-06)" does."""
    path = page(tmp_path, "# Page\n\nMeasured 2026-12-06 on 2 cores: the run took 3.5 s.\n")
    done = script("--audit", str(path))
    assert "0 lines of prose" in done.stdout, done.stdout


BAD_GEMM = ("{name: bad, operators: [{name: g, layer_type: fc, kind: gemm, m: 32, n: 32, "
            "k: -1}]}")


def test_a_file_shown_inline_is_written_and_a_moved_figure_fails(tmp_path):
    """A command's trailing `# NAME.yaml: YAML` comment writes that file before the run
    (the rule tests/test_docs_examples.py applies too): the error it prints is compared,
    and a moved figure on it fails --check naming FILE:LINE."""
    command = f"accsim run --arch edge_32x32 --workload g.yaml   # g.yaml: {BAD_GEMM}"
    line = "accsim: error: g.yaml: operators[0](g).k: Input should be greater than "

    def text(quoted: str) -> str:
        return f"# Page\n\n<!-- accsim-example -->\n```\n$ {command}\n{quoted}\n```\n"

    good = page(tmp_path, text(line + "0"))
    done = script("--check", str(good))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "g.yaml").exists()  # written in the scratch folder only
    moved = page(tmp_path, text(line + "1"))
    done = script("--check", str(moved))
    assert done.returncode == 1
    assert f"{moved}:6: quoted: {line}1" in done.stdout
    assert f"accsim now prints: {line}0" in done.stdout


def test_a_named_block_is_the_file_of_later_commands_and_of_their_cache_key(tmp_path):
    """A yaml block whose first line names a file (`# g.yaml`) is that file for the
    page's later commands; an edit of it is a new cache key, never a stale output."""
    command = "accsim run --arch edge_32x32 --workload g.yaml --heuristic array_aligned"
    quoted = "small on edge_32x32 (engine fast): 641 cycles = 0.001 ms at 1.0 GHz"

    def text(m: int) -> str:
        return ("# Page\n\n```yaml\n# g.yaml\nname: small\noperators:\n  - {name: g, "
                f"layer_type: fc, kind: gemm, m: {m}, n: 32, k: 64}}\n```\n\n"
                f"<!-- accsim-example -->\n```\n$ {command}\n{quoted}\n```\n")

    cache = tmp_path / "cache"
    path = page(tmp_path, text(32))
    done = script("--check", "--cache", str(cache), str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    path.write_text(text(64))  # twice the rows: more cycles
    done = script("--check", "--cache", str(cache), str(path))
    assert done.returncode == 1, done.stdout  # rerun with the edited file
    assert f"{path}:13: quoted: {quoted}" in done.stdout
    assert "accsim now prints: small on edge_32x32 (engine fast): 981 cycles" in done.stdout


def test_the_sweep_summary_time_and_rate_are_wall_clock():
    """`accsim sweep run`'s "computed in T s (R points/s)" (sweep_command.describe_summary)
    is masked like "s wall"; the counts on the line are still compared."""
    from experiments.readme_numbers import normal
    from simulator.sweep.sweep_command import describe_summary
    from simulator.sweep.coordinator import Summary

    quoted = "0 already stored, 60 computed in 15.5 s (3.9 points/s); store s.sqlite"
    printed = describe_summary(Summary(60, 0, 60, 0, False, 7.25), "s.sqlite")
    assert printed != quoted and normal(printed) == normal(quoted)
    assert normal(quoted.replace("60 computed", "61 computed")) != normal(quoted)
    assert normal("wrote 15.5 s (3.9 points/s)") == "wrote 15.5 s (3.9 points/s)"


SWEEP_PAGE = """\
# Page

```yaml
# g.yaml
name: g
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 32, n: 32, k: 64}
```

```yaml
# s.yaml
name: s
platform: edge_32x32
workloads: [g.yaml]
axes:
  systolic_array.rows: [8, 16]
```

<!-- accsim-example -->
```
$ accsim sweep run s.yaml --store s.sqlite --workers 1 --heuristic array_aligned
0 already stored, 2 computed in 9.9 s (9.9 points/s); store s.sqlite
$ accsim sweep run s.yaml --store s.sqlite --workers 1 --heuristic array_aligned
2 already stored, 0 computed in 9.9 s (9.9 points/s); store s.sqlite
```
"""


def test_a_command_after_cached_ones_sees_what_they_wrote(tmp_path):
    """The same command twice prints two things (a sweep's second run finds its store):
    each is kept under a key of the page's commands before it, and a command not in the
    cache runs after the cached ones before it have run again, to write what it reads."""
    cache = tmp_path / "cache"
    path = page(tmp_path, SWEEP_PAGE)
    done = script("--check", "--cache", str(cache), str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list(cache.glob("*.json"))) == 2
    third = SWEEP_PAGE.splitlines()[-3:-1]  # the second run once more, not yet cached
    path.write_text(SWEEP_PAGE[:-len("```\n")] + "\n".join(third) + "\n```\n")
    done = script("--check", "--cache", str(cache), str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(list(cache.glob("*.json"))) == 3
