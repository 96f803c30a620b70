"""Bad and hostile input to `accsim review` (study specs, output and cache folders with
links planted in them, text meant to become markup), `accsim verify` (forged,
truncated and huge packets and results) and the multi-chip flags of `accsim run`.

Every case runs in-process under SECONDS of CPU (timed_cli) with a sentinel folder
beside the working folder (links in the cases point into it) and asserts: no
traceback, the sentinel byte-for-byte unchanged, nothing written in the working folder
but the output the case names. A refused case exits non-zero with one error line
naming the file or flag; an accepted case exits 0, and for a review no raw input
markup (`<script>`, `<img`, a live Markdown link or image) reaches index.html,
packet.md or a figure.

Each row: (id, argv, {file name: content}, fragments the output must contain,
accepted, outputs the case may write).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from simulator.cli import main
from timed_cli import run_main
from test_bad_inputs import WORKLOAD, _make

SECONDS = 5
MAX_MESSAGE_CHARS = 1200
REVIEW_OUT = "out"
STUDY = {"title": "t", "objective": "o", "owners": ["me"],
         "scope": {"platforms": ["edge_32x32"], "workloads": ["w.yaml"]},
         "baseline": "edge_32x32"}
MARKER = ".accsim-review"
LISTING = "a folder accsim writes; the files it wrote here:\n"
SCRIPT = "<script>alert(1)</script>"
CASES: list[tuple] = []


def case(name: str, argv: list[str], files: dict, *fragments: str,
         accepted: bool = False, writes: tuple[str, ...] = ()) -> None:
    CASES.append((name, argv, files, list(fragments), accepted, writes))


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def study(**changes) -> str:
    data = yaml.safe_load(dump(STUDY))
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return dump(data)


def workload(**changes) -> str:
    data = yaml.safe_load(dump(WORKLOAD))
    data.update({k: v for k, v in changes.items() if k != "op"})
    data["operators"][0].update(changes.get("op", {}))
    return dump(data)


REVIEW = ["review", "s.yaml", "--out", REVIEW_OUT, "--no-cache"]
BASE_FILES = {"w.yaml": workload(), "s.yaml": study()}


def review_case(name, files, *fragments, argv=REVIEW, accepted=False,
                writes=(REVIEW_OUT,)):
    case(f"review: {name}", argv, BASE_FILES | files, *fragments, accepted=accepted,
         writes=writes)


# --- study specs refused before anything is written.
for name, text, fragments in (
        ("bad YAML", "title: [unclosed\n", ["s.yaml", "malformed YAML"]),
        ("tab indentation", "title: t\n\tobjective: o\n", ["s.yaml", "malformed YAML"]),
        ("duplicate key", study() + "title: again\n", ["s.yaml", "duplicate key"]),
        ("unknown top-level key", study() + "titel: x\n", ["s.yaml", "titel"]),
        ("unknown scope key", study(scope__platfroms=["x"]), ["s.yaml", "platfroms"]),
        ("empty file", "", ["s.yaml"]),
        ("a list at the top", "- a\n- b\n", ["s.yaml", "mapping"]),
        ("an alias", "a: &x 1\nb: *x\n", ["s.yaml", "alias"]),
        ("nesting 100 deep", "a: " + "[" * 100 + "]" * 100 + "\n", ["s.yaml", "nested"]),
        ("a huge integer", study(scope__serving={"rate_per_s": 1, "requests": 10**400}),
         ["s.yaml", "requests"]),
        ("title a list", study(title=["a", "b"]), ["s.yaml", "title"]),
        ("title with an escape sequence", study(title="t\x1b[31mred"), ["s.yaml", "title"]),
        ("owners empty", study(owners=[]), ["s.yaml", "owners"]),
        ("SLA negative", study(sla={"latency_ms": {"p99": -5}}), ["s.yaml", "sla"]),
        ("risk without owner", study(risks=[{"risk": "r"}]), ["s.yaml", "owner"]),
        ("baseline not under review", study(baseline="tpu_v1"), ["s.yaml", "baseline"]),
        ("platform escaping the folder", study(scope__platforms=["../sentinel/victim"]),
         ["victim"]),
        ("platform is a text file outside", study(
            scope__platforms=["../sentinel/victim.txt"], baseline="x"), ["victim.txt"]),
        ("mapping plan outside the folder", study(mappings=[
            {"plan": "../sentinel/victim.txt"}]), ["victim.txt"]),
        ("sweep spec escaping the folder", study(scope__sweep="../../nowhere.yaml"),
         ["s.yaml", "scope.sweep"]),
        ("variant setting an unknown field", study(scope__platforms=[
            {"base": "edge_32x32", "name": "v", "set": {"bogus.field": 1}}],
            baseline="v"), ["s.yaml", "bogus"]),
        ("system with zero TP", study(scope__system={"tp": 0}), ["s.yaml", "tp"]),
        ("system with 10^9 chips", study(scope__system={"chips": 10**9}),
         ["s.yaml", "chips"]),
        ("serving with no request", study(scope__serving={"rate_per_s": 1,
                                                           "requests": 0}),
         ["s.yaml", "requests"])):
    review_case(name, {"s.yaml": text}, *fragments)
review_case("study is a FIFO", {"s.yaml": "fifo"}, "s.yaml", "FIFO")
review_case("study is a folder", {"s.yaml": "directory"}, "s.yaml", "directory")
review_case("study missing", {}, "nope.yaml",
            argv=["review", "nope.yaml", "--out", REVIEW_OUT, "--no-cache"])
review_case("study with NUL bytes", {"s.yaml": b"title: t\x00\n"}, "s.yaml", "NUL")
review_case("study not UTF-8", {"s.yaml": b"title: \xe9t\xe9\n"}, "s.yaml", "UTF-8")
review_case("workload is a FIFO", {"w.yaml": "fifo"}, "w.yaml")
review_case("workload is a folder", {"w.yaml": "directory"}, "w.yaml")
review_case("sweep spec is a FIFO", {"s.yaml": study(scope__sweep="sw.yaml"),
                                     "sw.yaml": "fifo"}, "sw.yaml")

# --- the output folder and the cache: links and foreign files are refused, never
# followed; nothing outside is written or removed.
LINK_TO_DIR = "link:../sentinel/victim_dir"
LINK_TO_FILE = "link:../sentinel/victim.txt"
for name, files, fragments in (
        ("--out a link to a folder outside", {"out": LINK_TO_DIR}, ["symbolic link"]),
        ("--out a dangling link outside", {"out": "link:../sentinel/new_dir"},
         ["symbolic link"]),
        ("--out holds packet.json as a link", {f"out/{MARKER}": LISTING + "packet.json\n",
                                               "out/packet.json": LINK_TO_FILE},
         ["packet.json", "symbolic link"]),
        ("--out holds results as a link", {f"out/{MARKER}": LISTING,
                                           "out/results": LINK_TO_DIR},
         ["results", "symbolic link"]),
        ("--out holds figures as a link", {f"out/{MARKER}": LISTING,
                                           "out/figures": LINK_TO_DIR},
         ["figures", "symbolic link"]),
        ("--out holds index.html as a link", {f"out/{MARKER}": LISTING,
                                              "out/index.html": LINK_TO_FILE},
         ["index.html", "symbolic link"]),
        ("--out marker is a link", {f"out/{MARKER}": LINK_TO_FILE}, ["symbolic link"]),
        ("--out a listed result is a link", {
            f"out/{MARKER}": LISTING + "results/a.json\n",
            "out/results/a.json": LINK_TO_FILE}, ["results/a.json", "symbolic link"]),
        ("--out foreign folder", {"out/notes.txt": "keep me"}, ["holds no packet.json"]),
        ("--out marker with an unlisted file", {f"out/{MARKER}": LISTING,
                                                "out/results/x.json": "{}"},
         ["results/x.json", "did not write"]),
        ("--out holds a FIFO", {f"out/{MARKER}": LISTING, "out/pipe": "fifo"},
         ["pipe", "not a regular file"]),
        ("--out is a file", {"out": "a file"}, ["not a folder"]),
        ("--out is a FIFO", {"out": "fifo"}, ["not a folder"])):
    review_case(name, files, "--out", *fragments)
review_case("--out under a file", {"f.txt": "x"}, "f.txt",
            argv=["review", "s.yaml", "--out", "f.txt/out", "--no-cache"], writes=())
review_case("--out the working folder", {}, "holds no packet.json",
            argv=["review", "s.yaml", "--out", ".", "--no-cache"], writes=())
review_case("--cache a link outside", {"cache": LINK_TO_DIR}, "--cache", "symbolic link",
            argv=["review", "s.yaml", "--out", REVIEW_OUT, "--cache", "cache"],
            writes=(REVIEW_OUT, "cache"))
review_case("--cache a file", {"cache": "x"}, "--cache", "not a folder",
            argv=["review", "s.yaml", "--out", REVIEW_OUT, "--cache", "cache"],
            writes=(REVIEW_OUT, "cache"))

# Accepted: an earlier packet's marker that lists paths outside, or a hard link to a
# file outside: the packet is written and the file outside keeps its bytes.
review_case("--out marker listing paths outside", {
    f"out/{MARKER}": LISTING + "../sentinel/victim.txt\n/etc/hostname\n"},
    accepted=True)
review_case("--out listed file hard-linked outside", {
    f"out/{MARKER}": LISTING + "index.html\nresults/old.json\n",
    "out/index.html": "hardlink:../../sentinel/victim.txt",
    "out/results/old.json": "hardlink:../../sentinel/victim2.txt"}, accepted=True)
review_case("--out a new nested folder", {}, accepted=True,
            argv=["review", "s.yaml", "--out", "a/b/c", "--no-cache"], writes=("a",))

# --- input text meant to become markup or formulas: escaped in every format.
for name, files in (
        ("script in the title", {"s.yaml": study(title=SCRIPT)}),
        ("Markdown link in the objective", {"s.yaml": study(
            objective="[click](javascript:alert(1)) <img src=x onerror=alert(1)>")}),
        ("Markdown image in the owners", {"s.yaml": study(
            owners=["![i](http://evil.example/x.png)"])}),
        ("headings and HTML in a risk", {"s.yaml": study(risks=[
            {"risk": "# heading\n- list <b>x</b>\n<script>x</script>", "owner": "me",
             "mitigation": "see https://evil.example and www.evil.example"}])}),
        ("HTML comment and backticks", {"s.yaml": study(
            objective="`code` <!-- hidden --> **bold** | pipe | <iframe src=x>")}),
        ("script in the workload name", {"w.yaml": workload(name=SCRIPT)}),
        ("script and pipes in an operator name", {"w.yaml": workload(
            op={"name": "<script>x</script>|a|b"})}),
        ("script in the layer type", {"w.yaml": workload(op={"layer_type": SCRIPT})}),
        ("unbalanced math in the workload name", {"w.yaml": workload(name="a$\\frac{b")}),
        ("path in the workload name", {"w.yaml": workload(name="../../sentinel/pwn")}),
        ("script in a what-if platform name", {"s.yaml": study(
            scope__platforms=[{"base": "edge_32x32", "name": "<script>v</script>",
                               "set": {"clock_ghz": 1.5}}],
            baseline="<script>v</script>")}),
        ("script in a mapping label", {"s.yaml": study(
            mappings=[{"name": "<script>m</script>"}])}),
        ("script in a precision change", {"s.yaml": study(precision_changes=[
            {"what": "<script>p</script> [x](y)", "to_dtype": "int8"}])})):
    review_case(name, files, accepted=True)

# --- CSV cells that a spreadsheet would run as formulas.
CSV_RUN = ["run", "--workload", "w.yaml", "--arch", "edge_32x32", "--csv", "r.csv"]
for name, op_name in (("equals", "=HYPERLINK(\"http://evil\")"), ("plus", "+1+1"),
                      ("minus", "-2+3"), ("at", "@SUM(A1)")):
    case(f"run --csv: operator name starting with {name}", CSV_RUN,
         {"w.yaml": workload(op={"name": op_name})}, accepted=True, writes=("r.csv",))
case("run --csv: a link as the CSV", CSV_RUN, {"w.yaml": workload(), "r.csv": LINK_TO_FILE},
     "r.csv", "symbolic link")
case("run --json: a link as the JSON", ["run", "--workload", "w.yaml", "--arch",
                                        "edge_32x32", "--json", "r.json"],
     {"w.yaml": workload(), "r.json": LINK_TO_FILE}, "r.json", "symbolic link")
case("run --trace: a dangling link", ["run", "--workload", "w.yaml", "--arch",
                                      "edge_32x32", "--trace", "t.json"],
     {"w.yaml": workload(), "t.json": "link:../sentinel/new.json"}, "t.json",
     "symbolic link")

# --- verify: forged, truncated and huge packets and results.
PACKET = {"packet": {"format": "accsim-review-packet", "version": 2},
          "study": {"path": "s.yaml", "sha256": "0" * 64},
          "options": {"fusion": None, "ignore_capacity": False},
          "results": [{"kind": "run", "path": "results/a.json", "sha256": "0" * 64}],
          "sections": []}


def packet(**changes) -> str:
    return json.dumps(PACKET | changes)


VERIFY = ["verify", "p.json"]
for name, content, fragments in (
        ("not JSON", "{not json", ["p.json", "not JSON"]),
        ("truncated", '{"study": {"path": "s.yaml", "sha', ["p.json", "not JSON"]),
        ("empty", "", ["p.json"]),
        ("nested 1000 deep", "[" * 1000 + "]" * 1000, ["p.json", "nested"]),
        ("a 5000-digit number", '{"a": ' + "9" * 5000 + "}", ["p.json"]),
        ("NaN", '{"a": NaN}', ["p.json", "NaN"]),
        ("a list at the top", "[1, 2]", ["p.json"]),
        ("FIFO", "fifo", ["p.json", "FIFO"]),
        ("folder", "directory", ["p.json", "directory"]),
        ("100 MB sparse", "sparse:100000000", ["p.json", "larger than"]),
        ("result path escaping the folder", packet(results=[
            {"kind": "run", "path": "../sentinel/victim.txt", "sha256": "0" * 64}]),
         ["p.json", "results", "inside the packet"]),
        ("absolute result path", packet(results=[
            {"kind": "run", "path": "/etc/passwd", "sha256": "0" * 64}]),
         ["p.json", "inside the packet"]),
        ("figure path escaping the folder", packet(sections=[{"figures": [
            {"file": "figures/../../x.svg", "sha256": "0" * 64}]}]),
         ["p.json", "figures", "inside the packet"]),
        ("result path with a NUL", packet(results=[
            {"kind": "run", "path": "results/a\u0000.json", "sha256": "0" * 64}]),
         ["p.json"]),
        ("unknown result kind", packet(results=[
            {"kind": "exec", "path": "results/a.json", "sha256": "0" * 64}]),
         ["p.json", "kind"]),
        ("sha256 not hex", packet(study={"path": "s.yaml", "sha256": "<script>"}),
         ["p.json", "sha256"])):
    case(f"verify: packet {name}", VERIFY, {"p.json": content}, *fragments)
for name, content, fragments in (
        ("an empty object", "{}", ["r.json"]),
        ("cycles as text", '{"manifest": {}, "workload": {"cycles": "many"}}', ["r.json"]),
        ("truncated", '{"manifest": {"model_version": 1', ["r.json", "not JSON"]),
        ("FIFO", "fifo", ["r.json", "FIFO"]),
        ("100 MB sparse", "sparse:100000000", ["r.json", "larger than"])):
    case(f"verify: result {name}", ["verify", "r.json"], {"r.json": content}, *fragments)

# --- multi-chip flags of `accsim run` and `accsim serve`.
RUN = ["run", "--workload", "w.yaml", "--arch", "tpu_v5e_like"]
for name, flags, fragments in (
        ("chips zero", ["--chips", "0"], ["--chips"]),
        ("chips negative", ["--chips", "-1"], ["--chips"]),
        ("chips 10^20", ["--chips", str(10**20)], ["--chips"]),
        ("chips a word", ["--chips", "many"], ["--chips"]),
        ("tp zero", ["--tp", "0"], ["--tp"]),
        ("tp negative", ["--tp", "-4"], ["--tp"]),
        ("tp 2^63", ["--tp", str(2**63)], ["--tp"]),
        ("tp in float notation", ["--tp", "1e3"], ["--tp"]),
        ("pp zero", ["--pp", "0"], ["--pp"]),
        ("pp beyond the layers", ["--pp", "1000"], ["--pp", "layers"]),
        ("ep zero", ["--ep", "0"], ["--ep"]),
        ("ep on one chip", ["--ep", "3"], ["--ep", "divide the chips"]),
        ("ep on a dense workload", ["--chips", "2", "--tp", "2", "--ep", "2"],
         ["--ep", "mixture-of-experts"]),
        ("chips not T x P", ["--chips", "4", "--tp", "3"], ["--chips", "must equal"]),
        ("T x P above the chips", ["--chips", "4", "--tp", "2", "--pp", "4"],
         ["--chips", "must equal"]),
        ("chips without links", ["--chips", "2", "--tp", "2", "--arch", "edge_32x32"],
         ["interconnect"])):
    case(f"run: {name}", RUN + flags, {"w.yaml": workload()}, *fragments)
SERVE = ["serve", "--workload", "w.yaml", "--arch", "tpu_v5e_like", "--rate", "10",
         "--requests", "4"]
for name, flags in (("chips zero", ["--chips", "0"]), ("tp negative", ["--tp", "-2"]),
                    ("chips 10^20", ["--chips", str(10**20)])):
    case(f"serve: {name}", SERVE + flags, {"w.yaml": workload()}, flags[0])


# --- the harness.

def _make_file(root: Path, name: str, content) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str) and content.startswith("hardlink:"):
        os.link(root / content.removeprefix("hardlink:").removeprefix("../"), path)
    else:
        _make(path, content)


def _state(folder: Path, skip: tuple[str, ...] = ()) -> dict:
    """Every entry under `folder` (links not followed) with its kind and content hash."""
    state = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            relative = str(path.relative_to(folder))
            if relative.split("/")[0] in skip:
                continue
            info = path.lstat()
            if path.is_symlink():
                state[relative] = ("link", os.readlink(path))
            elif path.is_file():
                state[relative] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                state[relative] = ("other", info.st_mode)
    return state


def _run(argv: list[str], capsys) -> tuple[int, str, str, float]:
    return run_main(argv, capsys, SECONDS)


@pytest.fixture(scope="module", autouse=True)
def warm(tmp_path_factory):
    """One review and one run before the timed cases (first compilation, imports)."""
    folder = tmp_path_factory.mktemp("warm")
    for name, content in BASE_FILES.items():
        (folder / name).write_text(content)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        assert main(REVIEW) == 0
        assert main(RUN + ["--chips", "2", "--tp", "2"]) == 0
        assert main(["serve", "--workload", "w.yaml", "--arch", "tpu_v5e_like",
                     "--rate", "10", "--requests", "4"]) == 0
    finally:
        os.chdir(cwd)


def test_there_are_enough_cases():
    assert len(CASES) >= 60
    assert len({name for name, *_ in CASES}) == len(CASES)


MARKUP = (re.compile(r"<script", re.I), re.compile(r"<img", re.I),
          re.compile(r"<iframe", re.I), re.compile(r"<!--\s*hidden"))
# In Markdown also no live link, image, heading, autolink or emphasis from input text.
MARKDOWN = (re.compile(r"\]\((javascript|http)"), re.compile(r"^#+ heading", re.M),
            re.compile(r"https?://evil"), re.compile(r"www\.evil"),
            re.compile(r"\*\*bold"), re.compile(r"`code`"))


def _check_packet(out: Path) -> None:
    files = [out / "index.html", out / "packet.md", *sorted((out / "figures").glob("*"))]
    assert (out / "packet.json").is_file()
    for path in files:
        text = path.read_text()
        for pattern in MARKUP + (MARKDOWN if path.suffix == ".md" else ()):
            assert not pattern.search(text), (path.name, pattern.pattern)


@pytest.mark.parametrize("name, argv, files, fragments, accepted, writes", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_output_input(name, argv, files, fragments, accepted, writes, tmp_path,
                              monkeypatch, capsys):
    sentinel, work = tmp_path / "sentinel", tmp_path / "work"
    (sentinel / "victim_dir").mkdir(parents=True)
    (sentinel / "victim.txt").write_text("precious\n")
    (sentinel / "victim2.txt").write_text("precious too\n")
    work.mkdir()
    monkeypatch.chdir(work)
    for file, content in files.items():
        _make_file(work, file, content)
    watched = _state(sentinel), _state(work, writes)
    code, out, err, elapsed = _run(argv, capsys)
    assert elapsed < SECONDS
    assert "Traceback" not in out + err
    assert "\x1b" not in out + err
    assert (_state(sentinel), _state(work, writes)) == watched
    for fragment in fragments:
        assert fragment in out + err, f"{fragment!r} not in {(out + err)[-600:]!r}"
    if accepted:
        assert code == 0, err
        if argv[0] == "review":
            _check_packet(work / argv[argv.index("--out") + 1])
        if "--csv" in argv:
            cells = (work / "r.csv").read_text().splitlines()[1].split(",")
            assert cells[0].startswith("'") or cells[0].startswith('"\'')
        return
    assert code not in (0, None), f"accepted: {out[-400:]}"
    lines = err.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, err
    if code == 1:
        assert lines == errors
    assert len(errors[0]) < MAX_MESSAGE_CHARS
    for folder in writes:  # a refused review leaves no packet behind
        assert not (work / folder / "packet.json").exists() or \
            (work / folder / "packet.json").is_symlink()


def test_a_rerun_removes_only_what_it_wrote(tmp_path, monkeypatch, capsys):
    """A packet folder written twice: the first run's stale files go, a file the user
    dropped in is refused rather than deleted."""
    monkeypatch.chdir(tmp_path)
    for name, content in BASE_FILES.items():
        (tmp_path / name).write_text(content)
    assert main(REVIEW) == 0
    listed = (tmp_path / REVIEW_OUT / MARKER).read_text().splitlines()[1:]
    assert "packet.json" in listed and any(n.startswith("results/") for n in listed)
    (tmp_path / REVIEW_OUT / "results" / "mine.txt").write_text("user's")
    capsys.readouterr()
    assert main(REVIEW) == 1
    assert "results/mine.txt" in capsys.readouterr().err
    assert (tmp_path / REVIEW_OUT / "results" / "mine.txt").read_text() == "user's"


def test_a_cache_entry_planted_as_a_link_is_never_followed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name, content in BASE_FILES.items():
        (tmp_path / name).write_text(content)
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    argv = ["review", "s.yaml", "--out", "out", "--cache", "cache"]
    assert main(argv) == 0
    for entry in (tmp_path / "cache").glob("*.json"):
        entry.unlink()
        entry.symlink_to(victim)
    capsys.readouterr()
    assert main(argv) == 1
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious"
    shutil.rmtree(tmp_path / "cache")
    assert main(argv) == 0  # a fresh cache: recomputed and written
