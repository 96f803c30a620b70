"""Writing output files and folders: THE one guard every writer goes through, so that
accsim never follows a symbolic link, never writes outside the file or folder the user
named and never deletes what it did not write (DESIGN.md sections 7 and 12).

- `write_file(path, data)`: one output file the user named (--json, --csv, --plot,
  --trace...). The name must not be a symbolic link or anything but a regular file; the
  data goes to a new temporary file beside it (O_CREAT | O_EXCL | O_NOFOLLOW) that is
  renamed over the name, so a hard link to another file is never written through.
- `OutputFolder`: a folder the user named (review --out, the result cache). Every path
  inside it is walked one component at a time from the folder's descriptor with
  O_NOFOLLOW, so a link planted inside it (or a link as the folder) is refused, never
  followed; files are created as above. A folder with a marker (review's packet folder)
  records the files it wrote in its marker, accepts only a folder that is new, empty or
  holds exactly what the marker lists, and removes only files it listed.
- `check_output_path` and `check_distinct_outputs`, before any work: an output file can
  be written, and names neither a file the command reads nor another output's file.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path

from simulator.errors import AccsimError

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LISTED = 100_000  # entries a marker may list (a packet writes a few hundred)


@contextmanager
def writing(path: str, field: str | None = None):
    """Around the writing of one output file: an OS error (disk full, permission,
    a folder gone since check_output_path) becomes one AccsimError naming the file."""
    try:
        yield
    except OSError as exc:
        raise AccsimError(f"cannot write: {exc.strerror}", file=path, field=field) from None


def _refuse_existing(info: os.stat_result | None, path: str, field: str | None) -> None:
    if info is None or stat.S_ISREG(info.st_mode):
        return
    what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else \
        "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
    raise AccsimError(f"is {what}: accsim writes only a regular file of its own there "
                      "and never follows a link", file=path, field=field)


def _lstat_at(name: str, folder: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _replace_at(folder: int, name: str, data: bytes, *, shown: str,
                field: str | None) -> None:
    """Write `data` as `name` inside the open folder: a new temporary file, then an
    atomic rename over the name (which must be absent or a regular file)."""
    with writing(shown, field):  # a name longer than the system allows, say
        info = _lstat_at(name, folder)
    _refuse_existing(info, shown, field)
    temporary = f".{name}.{os.getpid()}.tmp"
    with writing(shown, field):
        handle = os.open(temporary, _NEW_FILE, 0o644, dir_fd=folder)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            os.unlink(temporary, dir_fd=folder)
            raise


def _encoded(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def check_file_name(path: str, field: str) -> None:
    """A path an option names is a file's: not empty, not ending in '/', '.' or '..'
    (Path() would drop a trailing slash and write a file of the folder's name)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if not path.strip() or path.endswith("/") or last in ("", ".", ".."):
        raise AccsimError(f"{path!r} is empty or names a directory, not a file",
                          field=field)


def check_output_path(path: str, option: str,
                      suffixes: tuple[str, ...] | None = None) -> None:
    """An output path given by command-line `option` ("json" for --json) can be
    written: it is not `-` (a file named so is seldom meant), its folder exists, it is
    not a folder or a link, it is writable, and its suffix is one of `suffixes` when
    given. Commands call it before any simulation, so no result is lost to a bad path."""
    flag = f"--{option.replace('_', '-')}"
    if path == "-":  # the commands that print there take it before calling this
        raise AccsimError("'-' (standard output) is not where this option writes: name a "
                          "file", field=flag)
    target = Path(path)
    if suffixes and target.suffix.lower() not in suffixes:
        raise AccsimError(f"must end in {' or '.join(suffixes)}", file=path, field=flag)
    check_file_name(path, flag)
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise AccsimError(f"cannot be written: {exc.strerror}", file=path,
                          field=flag) from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise AccsimError("is a directory", file=path, field=flag)
    _refuse_existing(info, path, flag)
    folder = target.parent
    if not folder.is_dir():
        raise AccsimError(f"folder {folder} does not exist", file=path, field=flag)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise AccsimError("cannot be written (permission denied)", file=path, field=flag)


def check_output_options(args, suffixes: dict[str, tuple[str, ...] | None]) -> None:
    """Each output option of `suffixes` (dest name: the suffixes it takes) that was
    given, an empty path included (which would otherwise read as not given and write
    nothing, silently), checked by check_output_path and check_distinct_outputs."""
    for option, allowed in suffixes.items():
        if getattr(args, option) is not None:
            check_output_path(getattr(args, option), option, allowed)
    check_distinct_outputs(args, tuple(suffixes))


def _named_paths(args) -> list[tuple[str, str]]:
    """(dest, text) of every text argument of a command line, list items included."""
    named = []
    for dest, value in vars(args).items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and text and "\x00" not in text:
                named.append((dest, text))
    return named


def _same_path(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def check_distinct_outputs(args, outputs: tuple[str, ...]) -> None:
    """No output option of `outputs` (dest names) names a file another argument names
    when that is an existing file (an input, read before the output replaces it) or
    another output (the one written last would replace the first): either way a file
    or a result would be lost."""
    named = _named_paths(args)
    for output in outputs:
        path = getattr(args, output, None)
        if not isinstance(path, str) or not path:
            continue
        for dest, other in named:
            if dest != output and _same_path(path, other) \
                    and (dest in outputs or os.path.isfile(other)):
                raise AccsimError(f"is also the file given for {dest.replace('_', '-')}:"
                                  " writing it would replace that file; name another",
                                  file=path, field=f"--{output.replace('_', '-')}")


def check_replaces_no_input(path: str | Path, inputs: list[str],
                            field: str | None = None) -> None:
    """An output path that is none of `inputs` (the files a result was computed from,
    as it records them): writing there would replace that file, as
    check_distinct_outputs refuses on the command line."""
    for other in inputs:
        if _same_path(str(path), other) and os.path.isfile(other):
            raise AccsimError("is a file this result was computed from: writing it would "
                              "replace that file; name another", file=str(path),
                              field=field)


def write_file(path: str | Path, data: str | bytes, *, field: str | None = None) -> None:
    """Write one output file the user named, never through a link (module docstring)."""
    target = Path(path)
    if target.name in ("", ".", ".."):
        raise AccsimError("names a folder, not a file", file=str(path), field=field)
    with writing(str(path), field):
        folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _replace_at(folder, target.name, _encoded(data), shown=str(path), field=field)
    finally:
        os.close(folder)


def _parts(relative: str, shown: str) -> list[str]:
    parts = relative.split("/")
    if any(part in ("", ".", "..") or "\x00" in part for part in parts):
        raise AccsimError(f"{relative!r} is not a plain path inside the folder",
                          file=shown)
    return parts


class OutputFolder:
    """A folder the user named, written only through descriptors (module docstring).

    Open it with `claim` (a packet folder with a marker) or `plain` (a cache); `close`
    it (or use it as a context manager) when done."""

    def __init__(self, path: Path, handle: int, field: str | None,
                 marker: str | None, listed: frozenset[str]):
        self.path, self._handle, self.field = path, handle, field
        self.marker, self.listed = marker, listed
        self.written: list[str] = []

    @classmethod
    def plain(cls, path: str | Path, *, field: str | None = None) -> OutputFolder:
        """A folder to write files in (created if absent); not a link itself."""
        root = _folder_path(path, field)
        return cls(root, _open_root(root, field), field, None, frozenset())

    @classmethod
    def claim(cls, path: str | Path, marker: str, *, field: str | None = None,
              signature: str | None = None) -> OutputFolder:
        """A folder accsim lays out itself: new, empty, or holding exactly the files
        its `marker` lists (written by an earlier run); anything else is refused, so
        nothing of the user's is overwritten or removed. The marker is written first,
        so a half-written folder is still recognised. `signature` names the file
        users know such a folder by (for the refusal's message)."""
        root = _folder_path(path, field)
        handle = _open_root(root, field)
        try:
            listed = _listed(handle, root, marker, field, signature or marker)
            folder = cls(root, handle, field, marker, listed)
            folder._write_marker()
        except BaseException:
            os.close(handle)
            raise
        return folder

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._handle >= 0:
            os.close(self._handle)
            self._handle = -1

    def shown(self, relative: str) -> str:
        return str(self.path / relative)

    @contextmanager
    def _folder_of(self, relative: str, *, create: bool):
        """The descriptor of the folder holding `relative` (made if `create`), each
        component opened without following a link; and the file's own name."""
        parts = _parts(relative, self.shown(relative))
        handle = os.dup(self._handle)
        try:
            for index, part in enumerate(parts[:-1]):
                shown = self.shown("/".join(parts[:index + 1]))
                if create and _lstat_at(part, handle) is None:
                    _make_folder_at(part, handle, shown, self.field)
                try:
                    inner = os.open(part, _FOLDER, dir_fd=handle)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        _refuse_existing(_lstat_at(part, handle), shown, self.field)
                    raise AccsimError(f"cannot open: {exc.strerror}", file=shown,
                                      field=self.field) from None
                os.close(handle)
                handle = inner
            yield handle, parts[-1]
        finally:
            os.close(handle)

    def write(self, relative: str, data: str | bytes) -> bytes:
        """Write `relative` (e.g. "results/x.json") inside the folder; the bytes written."""
        data = _encoded(data)
        if relative not in self.written:
            self.written.append(relative)
            if self.marker is not None and relative not in self.listed:
                self._write_marker()  # listed before it exists: a crash leaves it ours
        with self._folder_of(relative, create=True) as (handle, name):
            _replace_at(handle, name, data, shown=self.shown(relative), field=self.field)
        return data

    def read(self, relative: str, max_bytes: int) -> bytes | None:
        """A regular file's bytes inside the folder (None if absent, a link, or larger
        than max_bytes): for reading back a cache entry without following a link."""
        try:
            with self._folder_of(relative, create=False) as (handle, name):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                             dir_fd=handle)
                with os.fdopen(fd, "rb") as source:
                    info = os.fstat(source.fileno())
                    if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                        return None
                    return source.read(max_bytes + 1)[:max_bytes]
        except (OSError, AccsimError):
            return None

    def checked_path(self, relative: str) -> Path:
        """The path of `relative` for a library that opens it itself (SQLite), after
        checking every component: folders real (made if absent), the file absent or
        regular."""
        with self._folder_of(relative, create=True) as (handle, name):
            _refuse_existing(_lstat_at(name, handle), self.shown(relative), self.field)
        return self.path / relative

    def remove_stale(self, keep: set[str]) -> None:
        """Remove the files the marker listed from an earlier run that this run did
        not write and `keep` does not name: only regular files accsim wrote."""
        for relative in sorted(self.listed - set(self.written) - keep):
            try:
                with self._folder_of(relative, create=False) as (handle, name):
                    info = _lstat_at(name, handle)
                    if info is not None and stat.S_ISREG(info.st_mode):
                        os.unlink(name, dir_fd=handle)
            except (OSError, AccsimError):
                continue  # gone or no longer ours: left alone
        self.listed = frozenset()
        if self.marker is not None:
            self._write_marker()

    def _write_marker(self) -> None:
        lines = ["a folder accsim writes; the files it wrote here:"]
        lines += sorted(self.listed | set(self.written))
        with self._folder_of(self.marker, create=False) as (handle, name):
            _replace_at(handle, name, _encoded("\n".join(lines) + "\n"),
                        shown=self.shown(self.marker), field=self.field)

    def finish(self) -> None:
        """Record in the marker every file written (call after the last write)."""
        self._write_marker()


def _make_folder_at(name: str, folder: int, shown: str, field: str | None) -> None:
    """Make the folder `name` inside the open folder; one made by another process at
    the same moment is no error (the caller then opens it without following a link)."""
    with writing(shown, field):
        try:
            os.mkdir(name, 0o755, dir_fd=folder)
        except FileExistsError:
            pass


def _folder_path(path: str | Path, field: str | None) -> Path:
    """A folder's path as named; an empty name is refused (Path('') is the working
    folder, which no option names by being left empty)."""
    if not str(path).strip():
        raise AccsimError("is empty: name the folder to write", field=field)
    return Path(path)


def _open_root(root: Path, field: str | None) -> int:
    """The named folder's descriptor, made if absent; a link or a file is refused."""
    shown = str(root)
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        with writing(shown, field):
            # exist_ok: another process making the same folder at once is no error;
            # what stands there is checked below like any existing folder
            root.mkdir(parents=True, exist_ok=True)
            info = os.lstat(root)
    except OSError as exc:
        raise AccsimError(f"cannot open: {exc.strerror}", file=shown, field=field) from None
    if stat.S_ISLNK(info.st_mode):
        raise AccsimError("is a symbolic link: give the real folder, accsim never writes "
                          "through a link", file=shown, field=field)
    if not stat.S_ISDIR(info.st_mode):
        raise AccsimError("not a folder", file=shown, field=field)
    with writing(shown, field):
        return os.open(root, _FOLDER)


def _listed(handle: int, root: Path, marker: str, field: str | None,
            signature: str) -> frozenset[str]:
    """The files an earlier run listed in the marker, after checking the folder holds
    nothing else (links and foreign files refuse the folder)."""
    found = _walk(handle, "", root, field)
    if not found:
        return frozenset()
    if marker not in found:
        raise AccsimError(f"folder is not empty and holds no {signature} (no {marker}: "
                          "accsim did not write it); give a new or empty folder",
                          file=str(root), field=field)
    with os.fdopen(os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                           dir_fd=handle), "rb") as source:
        text = source.read(64 * 2**20).decode("utf-8", "replace")
    listed = {line for line in text.splitlines()[1:MAX_LISTED + 1] if line}
    foreign = sorted(set(found) - listed - {marker})
    if foreign:
        raise AccsimError(f"holds {foreign[0]!r}, which accsim did not write (and "
                          f"{len(foreign) - 1} more); give a new or empty folder",
                          file=str(root), field=field)
    return frozenset(listed & set(found))


def _walk(handle: int, prefix: str, root: Path, field: str | None) -> list[str]:
    """Every file under the open folder, as relative paths; a link or a special file
    anywhere refuses the folder (nothing is followed)."""
    found = []
    for name in sorted(os.listdir(handle))[:MAX_LISTED]:
        relative = f"{prefix}{name}"
        info = os.stat(name, dir_fd=handle, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            inner = os.open(name, _FOLDER, dir_fd=handle)
            try:
                found += _walk(inner, f"{relative}/", root, field)
            finally:
                os.close(inner)
        elif stat.S_ISREG(info.st_mode):
            found.append(relative)
        else:
            _refuse_existing(info, str(root / relative), field)
    return found
