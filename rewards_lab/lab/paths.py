"""Where a notebook's files are, wherever it runs: the repository root, `notebooks/`, or papermill's `--cwd`.

A notebook names its files relative to the repository (`data/sample_events.parquet`) and calls `locate`. The
repository is the directory holding both `data/` and `notebooks/`: `REWARDS_LAB_ROOT` if set, else the first
such directory from the working directory upwards, else the checkout this package was installed from.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_VARIABLE = "REWARDS_LAB_ROOT"
_MARKERS = ("data", "notebooks")
_PACKAGE_CHECKOUT = Path(__file__).resolve().parents[2]


def _is_root(directory: Path) -> bool:
    return all((directory / marker).is_dir() for marker in _MARKERS)


def repository_root(start: Path | None = None) -> Path:
    """The repository the notebooks belong to (see the module docstring for the order of the look-up)."""
    configured = os.environ.get(ROOT_VARIABLE)
    if configured:
        root = Path(configured).expanduser().resolve()
        if not _is_root(root):
            raise FileNotFoundError(f"{ROOT_VARIABLE}={configured} holds no data/ and notebooks/")
        return root
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if _is_root(directory):
            return directory
    if _is_root(_PACKAGE_CHECKOUT):
        return _PACKAGE_CHECKOUT
    raise FileNotFoundError(f"no directory with data/ and notebooks/ above {here}; set {ROOT_VARIABLE}")


def locate(path: str | os.PathLike[str], start: Path | None = None) -> Path:
    """A file parameter as an existing path: absolute, or relative to the working directory when it exists
    there, else relative to the repository root (so the same parameter value works from every directory)."""
    given = Path(path).expanduser()
    if given.is_absolute():
        return given
    here = start or Path.cwd()
    if (here / given).exists():
        return (here / given).resolve()
    return repository_root(here) / given
