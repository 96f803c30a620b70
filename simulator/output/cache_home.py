"""The user's cache folder, one rule for every cache accsim keeps (the kernel library,
serving's cost tables, review's runs): $XDG_CACHE_HOME when it is an absolute path,
else ~/.cache. The XDG Base Directory spec calls a relative value invalid, to be
ignored: read relative to the working folder, it scattered caches over whatever folder
a command ran from (the kernel library and review's runs did so; serving's costs
ignored it).

`check_folder` is the check of a folder an environment variable names, for the
variables whose folder is used as given (XDG_CACHE_HOME, ACCSIM_KERNEL_DIR)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from simulator.errors import AccsimError

VARIABLE = "XDG_CACHE_HOME"


def given_cache_home() -> str | None:
    """$XDG_CACHE_HOME where it is used (an absolute path), else None."""
    value = os.environ.get(VARIABLE, "")
    return value if os.path.isabs(value) else None


def cache_home() -> Path:
    """The folder caches go under: $XDG_CACHE_HOME if absolute, else ~/.cache."""
    given = given_cache_home()
    return Path(given) if given is not None else Path.home() / ".cache"


def checked_cache_home() -> Path:
    """cache_home(), where a cache is about to be made under it: an $XDG_CACHE_HOME
    that cannot be a folder (a file, a dangling link) is refused naming the variable."""
    given = given_cache_home()
    if given is not None:
        check_folder(given, VARIABLE)
    return cache_home()


def check_folder(path: str, variable: str) -> None:
    """An environment variable names a folder, or a path one can be made at: not a
    file, a device, a FIFO, a dangling link, or a path under a file. An AccsimError
    naming the variable otherwise."""
    def refuse(rule: str) -> AccsimError:
        return AccsimError(f"{path!r} {rule}, not a folder", field=variable)

    if "\x00" in path:
        raise refuse("holds a NUL character")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise refuse("is a dangling link") from None
        return  # made by `accsim compile`
    except NotADirectoryError:
        raise refuse("is a path under a file") from None
    except OSError as exc:
        raise refuse(f"cannot be read ({exc.strerror})") from None
    if not stat.S_ISDIR(info.st_mode):
        kind = ("a file" if stat.S_ISREG(info.st_mode) else
                "a FIFO" if stat.S_ISFIFO(info.st_mode) else
                "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "not a folder")
        raise refuse(f"is {kind}")
