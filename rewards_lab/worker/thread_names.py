"""Give the service's threads their names in the operating system too (Linux), for `top -H` and benchmarks.

Python 3.11 names threads for Python only; /proc/<pid>/task/*/comm shows every thread as `python`. The
benchmark (`benchmarks/events_http.py`) reads CPU per thread from /proc, so each long-lived thread of `serve`
calls `name_os_thread` when it starts. Elsewhere (no libc, not Linux) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

_PR_SET_NAME = 15
_libc: ctypes.CDLL | None = None
if sys.platform == "linux":
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:  # pragma: no cover - a Linux without a loadable libc
        _libc = None


def name_os_thread(name: str | None = None) -> None:
    """Set the calling thread's OS name (at most 15 bytes) to `name`, by default its Python name."""
    if _libc is None:
        return
    text = (name or threading.current_thread().name).encode("ascii", "replace")[:15]
    _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(text), 0, 0, 0)
