"""A JSONL listing names each file no load can find (R11.12, R11.14): one whose name no session
id escapes to, and a link to no file, where the first was named by an id no load finds and the
second left out without a word."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retinue.session import Session
from retinue.session._codec import encode_header
from retinue.stores import JSONLStore
from tests.stores._kit import run_turn
from tests.stores.conftest import jsonl_file


async def _store_fine(root: Path) -> Path:
    session = Session.create("fine")
    run_turn(session)
    async with JSONLStore(root) as store:
        store.attach_new(session)
    return jsonl_file(root, "fine")


@pytest.mark.parametrize("name", ["bad~zzzzname", "upper~007Ecase", "a b", "cut~00"])
async def test_a_file_whose_name_is_no_escaped_id_is_listed_as_skipped(
    tmp_path: Path, name: str
) -> None:
    """A file name that no id's escape gives (a malformed or upper-case ``~`` escape, a
    character the escape replaces) is skipped, naming the file and why, whatever its header."""
    fine = await _store_fine(tmp_path)
    stray = fine.with_name(f"{name}.jsonl")
    stray.write_bytes(b"\xff\xfe\n")
    async with JSONLStore(tmp_path, create=False) as store:
        listing = await store.listing()
    assert [header.id for header in listing.headers] == ["fine"]
    assert [(skipped.stored_as, skipped.problem) for skipped in listing.skipped] == [
        (
            str(stray),
            f"{stray}: its name is no session id's escaped file name, so no load finds it",
        )
    ]


async def test_a_file_named_by_an_id_s_escape_still_lists(tmp_path: Path) -> None:
    """An id whose file name holds escapes (``~`` itself, a space) lists as any other."""
    session = Session.create("a b~c")
    run_turn(session)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
    assert jsonl_file(tmp_path, "a b~c").name == "a~0020b~007ec.jsonl"
    async with JSONLStore(tmp_path, create=False) as store:
        listing = await store.listing()
    assert ([header.id for header in listing.headers], listing.skipped) == (["a b~c"], ())


async def test_a_link_to_no_file_is_listed_as_skipped(tmp_path: Path) -> None:
    """A dangling ``.jsonl`` link in a bucket is skipped, naming the link and its target."""
    fine = await _store_fine(tmp_path)
    link = fine.with_name("dangling.jsonl")
    target = tmp_path / "nowhere.jsonl"
    os.symlink(target, link)
    link.with_name("ok.jsonl").write_text(encode_header(Session.create("ok").header) + "\n")
    async with JSONLStore(tmp_path, create=False) as store:
        listing = await store.listing()
    assert sorted(header.id for header in listing.headers) == ["fine", "ok"]
    assert [(skipped.stored_as, skipped.problem) for skipped in listing.skipped] == [
        (str(link), f"{link}: a link to {target}, which is no file")
    ]


@pytest.mark.parametrize("plain", [116, 117, 118, 119])
async def test_a_session_whose_long_id_is_cut_inside_an_escape_is_listed(
    tmp_path: Path, plain: int
) -> None:
    """R11.14: an id whose escaped name passes 200 characters is stored under its first 120,
    ``~~`` and a digest; cut inside an escape (``~00E9`` cut to ``~``) the stem holds
    ``~~~``, and the listing lists it as every load finds it, where it was skipped as a
    name no id escapes to."""
    session_id = "a" * plain + "é" * 30
    session = Session.create(session_id)
    run_turn(session)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
    async with JSONLStore(tmp_path, create=False) as store:
        listing = await store.listing()
    assert [header.id for header in listing.headers] == [session_id]
    assert listing.skipped == ()
