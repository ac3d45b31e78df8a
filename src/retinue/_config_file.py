"""Reading a configuration file: its bytes, bounded, as a TOML document (SPEC 13).

Every way the file can fail to read (missing, too large, not UTF-8, not TOML)
is a :class:`~retinue.ConfigError` naming the file.
"""

from __future__ import annotations

import codecs
import os
import tomllib
from typing import Any

from retinue._errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "read_toml"]


MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""The largest configuration file read: thousands of entries take a fraction of it."""


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The TOML document of the file *path*; a ConfigError naming it when it cannot be read."""
    where = os.fsdecode(path)  # a path-like may give bytes
    if not where:  # an unset variable, say: the message would name no file at all
        raise ConfigError("cannot read configuration: the path is empty")
    if "\0" in where:  # open() would raise a bare ValueError: no file has such a name
        raise ConfigError(f"cannot read configuration {where!r}: the path contains a NUL")
    try:
        with open(path, "rb") as file:
            # Read up to a bound: a device or pipe given by mistake (/dev/zero) never ends,
            # and would be read until memory ran out.
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot read configuration {where}: {reason}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"cannot read configuration {where}: larger than {MAX_CONFIG_BYTES} bytes, "
            "more than any configuration holds"
        )
    if data.startswith(codecs.BOM_UTF8):
        # Some editors save one; the TOML reader would report an invalid statement at 1:1.
        raise ConfigError(
            f"invalid TOML in {where}: the file starts with a byte order mark (U+FEFF), "
            "which TOML does not allow: save it as UTF-8 without one"
        )
    try:
        return tomllib.loads(data.decode())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {where}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"invalid TOML in {where}: not UTF-8 text ({exc})") from exc
    except ValueError as exc:
        # Raised past the reader's own checks: an integer of more digits than int()
        # converts (sys.get_int_max_str_digits(), 4300 by default).
        raise ConfigError(f"invalid TOML in {where}: a value cannot be read: {exc}") from exc
    except RecursionError as exc:
        # tomllib reads nested arrays and inline tables recursively, with no bound of its own.
        raise ConfigError(f"invalid TOML in {where}: nested too deeply to read") from exc
