"""A file store's path no file can have is a configuration error naming the path.

No file name can hold a NUL character, nor a lone surrogate that no bytes decoded
to; the OS layer would refuse them only with a bare ``ValueError`` ("embedded null
byte") or ``UnicodeEncodeError``, later, and naming nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from retinue import ConfigError
from retinue.stores import JSONLStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore

STORES: dict[str, tuple[Callable[..., BufferedStore], str]] = {
    "sqlite": (SQLiteStore, "SQLiteStore path"),
    "jsonl": (JSONLStore, "JSONLStore root"),
}


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize("create", [True, False])
@pytest.mark.parametrize("as_path", [False, True], ids=["str", "Path"])
def test_a_store_path_holding_nul_is_refused_at_construction(
    kind: str, tmp_path: Path, *, create: bool, as_path: bool
) -> None:
    """R11.12: the configured location is checked when the store is made, as a
    ``ConfigError`` coded ``INVALID_STORE_PATH`` that names it (and still a ValueError)."""
    store, what = STORES[kind]
    text = os.path.join(tmp_path, "sessions\0.db")
    with pytest.raises(ConfigError) as caught:
        store(Path(text) if as_path else text, create=create)
    assert caught.value.code == "INVALID_STORE_PATH"
    assert caught.value.message == (
        f"{what} {text!r} contains a NUL character, which no file name can hold"
    )
    assert isinstance(caught.value, ValueError)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize("create", [True, False])
def test_a_store_path_holding_a_lone_surrogate_is_refused_at_construction(
    kind: str, tmp_path: Path, *, create: bool
) -> None:
    """R11.12: a character the file system's encoding cannot write is refused as a NUL is,
    naming the path and the character."""
    store, what = STORES[kind]
    text = os.path.join(tmp_path, "sessions\ud800.db")
    with pytest.raises(ConfigError) as caught:
        store(text, create=create)
    assert caught.value.code == "INVALID_STORE_PATH"
    assert caught.value.message == (
        f"{what} {text!r} holds '\\ud800' at position {len(text) - 4}, which the file "
        f"system's encoding ({sys.getfilesystemencoding()}) cannot write"
    )
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", sorted(STORES))
async def test_a_store_path_of_bytes_no_text_encoding_could_decode_opens(
    kind: str, tmp_path: Path
) -> None:
    """A name decoded with ``surrogateescape`` (its bytes not UTF-8) is a name a file has."""
    store, _ = STORES[kind]
    async with store(os.path.join(tmp_path, os.fsdecode(b"odd \xff name.db"))) as opened:
        assert (await opened.listing()).headers == ()


@pytest.mark.parametrize("kind", sorted(STORES))
async def test_a_store_path_without_nul_still_opens(kind: str, tmp_path: Path) -> None:
    """The check refuses only the NUL: a name with other odd characters opens as any name does."""
    store, _ = STORES[kind]
    async with store(tmp_path / "odd \x01 name\t\u2028.db") as opened:
        assert (await opened.listing()).headers == ()
