"""Room in the open-file limit for a command that holds many sockets and files at once."""

from __future__ import annotations

import sys

__all__ = ["make_room"]


def make_room(needed: int) -> int | None:
    """Raise this process's soft open-file limit to *needed*, as far as the hard limit allows.

    Returns None when *needed* descriptors fit, else the limit they exceed.
    Only as far as needed: a soft limit raised further would be inherited by
    every process the command starts.
    """
    if sys.platform == "win32":  # no per-process soft limit on open sockets to raise
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError, OverflowError):
        # macOS refuses a soft limit above kern.maxfilesperproc, even below the hard limit;
        # under an unlimited hard limit, a count past a C long cannot even be asked for.
        return soft
    return None if target >= needed else target
