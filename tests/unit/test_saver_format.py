"""The storage format: list records, chunks, body framing, references and refs."""

from __future__ import annotations

import hashlib
import zlib

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_stm.checkpoint._format import (
    CHUNK_SIZE,
    DIGEST_SIZE,
    MARKER_KEY,
    FormatError,
    ListRow,
    decode_ops,
    decode_refs,
    diff_ops,
    encode_ops,
    encode_refs,
    escape,
    expand_list,
    is_message_list,
    list_digest,
    list_ref,
    merge_ops,
    pack_body,
    parse_ops,
    read_ref,
    snapshot_rows,
    split_digests,
    unpack_body,
    value_ref,
)


def digests(n: int, seed: str = "d") -> list[bytes]:
    """``n`` distinct 16-byte digests."""
    return [
        hashlib.blake2b(f"{seed}{i}".encode(), digest_size=DIGEST_SIZE).digest() for i in range(n)
    ]


def snapshot(entries: list[bytes]) -> dict[bytes, ListRow]:
    """The rows of a snapshot of ``entries`` (its record and its chunks), by digest."""
    row, chunks = snapshot_rows(list_digest(entries), entries)
    return {r.digest: r for r in (*chunks, row)}


def delta(base: list[bytes], entries: list[bytes]) -> ListRow:
    """A delta record of ``entries`` against the snapshot of ``base``."""
    ops = diff_ops(entries, {d: i for i, d in enumerate(base)})
    return ListRow(list_digest(entries), list_digest(base), len(entries), encode_ops(ops))


def incompressible(n: int) -> bytes:
    """``n`` bytes that zlib cannot shrink."""
    out = b""
    while len(out) < n:
        out += hashlib.blake2b(out[-64:] + b"x").digest()
    return out[:n]


class TestOps:
    """Delta operations: ranges of the snapshot and literal digests."""

    def test_ranges_and_literals_round_trip(self) -> None:
        """Copy ranges come from the snapshot, literals are added in place."""
        base = [bytes([i]) * 16 for i in range(5)]
        new = b"\xff" * 16
        ops = encode_ops([(0, 2), new, (3, 5)])
        assert parse_ops(ops) == [(0, 2), new, (3, 5)]
        assert decode_ops(ops, base) == [base[0], base[1], new, base[3], base[4]]

    def test_empty_ops_are_an_empty_list(self) -> None:
        """No operations decode to no digests."""
        assert encode_ops([]) == b""
        assert decode_ops(b"", digests(3)) == []

    def test_diff_ops_round_trip_through_edits(self) -> None:
        """Trims, removals, reorderings and new digests are all expressed against the base."""
        base = digests(20)
        new = digests(3, "new")
        index = {d: i for i, d in enumerate(base)}
        for entries in (
            base[5:],  # front trimmed
            base[:7] + base[9:],  # a run removed
            [base[3], base[0], base[0], *new],  # reordered, repeated, new
            [*base, *new],  # appended
            new,  # nothing shared
        ):
            assert decode_ops(encode_ops(diff_ops(entries, index)), base) == entries

    def test_diff_ops_uses_one_range_per_run(self) -> None:
        """Consecutive snapshot positions become one range, so a trim is one op."""
        base = digests(10)
        index = {d: i for i, d in enumerate(base)}
        assert diff_ops(base[2:], index) == [(2, 10)]
        assert diff_ops([*base[:3], *base[6:]], index) == [(0, 3), (6, 10)]

    def test_merge_ops_joins_adjacent_ranges(self) -> None:
        """A range that ends where the next one starts is merged; others are kept apart."""
        lit = b"x" * 16
        assert merge_ops([(0, 3)], [(3, 5), lit]) == [(0, 5), lit]
        assert merge_ops([(0, 3)], [(4, 5)]) == [(0, 3), (4, 5)]
        assert merge_ops([lit], [(0, 2)]) == [lit, (0, 2)]
        assert merge_ops([], [lit]) == [lit]

    def test_bad_tag_raises_format_error(self) -> None:
        """An op that is neither a range nor a literal is a corrupt record."""
        with pytest.raises(FormatError, match="bad op"):
            parse_ops(encode_ops([(0, 1)]) + b"Z" + b"x" * 16)

    @pytest.mark.parametrize("length", [1, 5, 8, 10, 25])
    def test_truncated_ops_raise_format_error(self, length: int) -> None:
        """Ops cut inside a range or a literal are a corrupt record."""
        ops = encode_ops([(0, 2), b"x" * 16])  # 9 bytes of range, then 17 of literal
        with pytest.raises(FormatError, match="corrupt list record"):
            parse_ops(ops[:length])

    def test_range_outside_the_snapshot_raises_format_error(self) -> None:
        """A range past the end of its snapshot is a corrupt record."""
        with pytest.raises(FormatError, match="range 0:4 of 3"):
            decode_ops(encode_ops([(0, 4)]), digests(3))

    def test_split_digests_rejects_partial_digests(self) -> None:
        """A digest list whose length is not a multiple of 16 is corrupt."""
        with pytest.raises(FormatError):
            split_digests(b"x" * 17)


class TestSnapshotRows:
    """Snapshot records: flat below ``CHUNK_SIZE``, chunk digests plus a tail above."""

    def test_short_snapshot_is_plain_concatenation(self) -> None:
        """A snapshot of fewer than CHUNK_SIZE digests is the digests back to back."""
        entries = digests(3)
        row, chunks = snapshot_rows(b"s" * 16, entries)
        assert chunks == []
        assert (row.digest, row.base, row.length) == (b"s" * 16, None, 3)
        assert row.ops == b"".join(entries)
        assert split_digests(row.ops) == entries

    @pytest.mark.parametrize(
        ("n", "full"),
        [(CHUNK_SIZE - 1, 0), (CHUNK_SIZE, 1), (CHUNK_SIZE + 44, 1), (2 * CHUNK_SIZE, 2)],
    )
    def test_long_snapshot_refers_to_chunks(self, n: int, full: int) -> None:
        """Each full CHUNK_SIZE run becomes a chunk row; the snapshot holds their digests
        then the tail digests."""
        entries = digests(n)
        row, chunks = snapshot_rows(list_digest(entries), entries)
        assert len(chunks) == full
        tail = n - full * CHUNK_SIZE
        assert len(row.ops) == DIGEST_SIZE * (full + tail)
        assert row.ops[: full * DIGEST_SIZE] == b"".join(c.digest for c in chunks)
        assert row.ops[full * DIGEST_SIZE :] == b"".join(entries[full * CHUNK_SIZE :])
        for i, chunk in enumerate(chunks):
            assert (chunk.base, chunk.length) == (b"", CHUNK_SIZE)
            assert chunk.ops == b"".join(entries[i * CHUNK_SIZE : (i + 1) * CHUNK_SIZE])

    def test_equal_runs_share_a_chunk(self) -> None:
        """Two snapshots that start with the same CHUNK_SIZE digests share the chunk row."""
        entries = digests(CHUNK_SIZE + 10)
        _, first = snapshot_rows(b"a" * 16, entries)
        _, second = snapshot_rows(b"b" * 16, [*entries, *digests(5, "more")])
        assert [c.digest for c in first] == [c.digest for c in second]

    def test_chunk_digest_is_not_a_list_digest(self) -> None:
        """A chunk is keyed apart from the list of the same digests, and is not a list."""
        entries = digests(CHUNK_SIZE)
        row, (chunk,) = snapshot_rows(list_digest(entries), entries)
        assert chunk.digest != row.digest
        with pytest.raises(FormatError, match="is a chunk"):
            expand_list(chunk.digest, {chunk.digest: chunk, row.digest: row})


class TestExpandList:
    """Expanding a list record (with its snapshot and chunks) into body digests."""

    def test_flat_snapshot(self) -> None:
        """A snapshot expands to its digests and is its own snapshot."""
        entries = digests(7)
        rows = snapshot(entries)
        digest = list_digest(entries)
        assert expand_list(digest, rows) == (entries, digest, entries, None)

    def test_chunked_snapshot(self) -> None:
        """A snapshot of several chunks and a tail expands in order."""
        entries = digests(2 * CHUNK_SIZE + 17)
        rows = snapshot(entries)
        assert len(rows) == 3
        got, snap, snap_entries, ops = expand_list(list_digest(entries), rows)
        assert got == snap_entries == entries
        assert (snap, ops) == (list_digest(entries), None)

    @pytest.mark.parametrize("n", [10, CHUNK_SIZE + 30])
    def test_delta(self, n: int) -> None:
        """A delta expands against its (flat or chunked) snapshot and reports both."""
        base = digests(n)
        entries = [*base[3:], *digests(4, "new")]
        row = delta(base, entries)
        rows = {**snapshot(base), row.digest: row}
        got, snap, snap_entries, ops = expand_list(row.digest, rows)
        assert got == entries
        assert (snap, snap_entries, ops) == (list_digest(base), base, row.ops)

    def test_missing_record_raises_format_error(self) -> None:
        """A list whose record is not there cannot be expanded."""
        with pytest.raises(FormatError, match="missing list record"):
            expand_list(b"z" * 16, snapshot(digests(3)))

    def test_missing_snapshot_raises_format_error(self) -> None:
        """A delta whose snapshot is not there cannot be expanded."""
        base = digests(5)
        row = delta(base, [*base, *digests(1, "new")])
        with pytest.raises(FormatError, match="missing snapshot"):
            expand_list(row.digest, {row.digest: row})

    def test_delta_of_a_delta_raises_format_error(self) -> None:
        """A delta must point at a snapshot: a delta base is reported as a missing snapshot."""
        base = digests(5)
        middle = [*base, *digests(1, "m")]
        first = delta(base, middle)
        second = ListRow(list_digest(digests(2)), first.digest, 7, encode_ops([(0, 6)]))
        rows = {**snapshot(base), first.digest: first, second.digest: second}
        with pytest.raises(FormatError, match="missing snapshot"):
            expand_list(second.digest, rows)

    def test_missing_chunk_raises_format_error(self) -> None:
        """A snapshot whose chunk is not there cannot be expanded."""
        entries = digests(CHUNK_SIZE + 1)
        digest = list_digest(entries)
        rows = {d: r for d, r in snapshot(entries).items() if r.base is None}
        with pytest.raises(FormatError, match="missing chunk"):
            expand_list(digest, rows)

    def test_chunk_ref_to_a_list_raises_format_error(self) -> None:
        """A chunk digest that names a list record, not a chunk, is a missing chunk."""
        entries = digests(CHUNK_SIZE + 1)
        row, (chunk,) = snapshot_rows(list_digest(entries), entries)
        fake = ListRow(chunk.digest, None, CHUNK_SIZE, chunk.ops)
        with pytest.raises(FormatError, match="missing chunk"):
            expand_list(row.digest, {row.digest: row, fake.digest: fake})

    def test_wrong_length_raises_format_error(self) -> None:
        """A record whose digests do not add up to its length is corrupt."""
        entries = digests(4)
        good = snapshot(entries)[list_digest(entries)]
        bad = ListRow(good.digest, None, 5, good.ops)
        with pytest.raises(FormatError, match="4 of 5"):
            expand_list(bad.digest, {bad.digest: bad})
        base = digests(3)
        row = delta(base, base[1:])
        short = ListRow(row.digest, row.base, 9, row.ops)
        with pytest.raises(FormatError, match="2 of 9"):
            expand_list(short.digest, {**snapshot(base), short.digest: short})


class TestBodies:
    """Body framing: zlib compression when it saves space."""

    def test_compressible_body_round_trips_compressed(self) -> None:
        """A large repetitive payload is stored compressed and unpacks to itself."""
        data = b"hello world " * 100
        stored = pack_body("msgpack", data)
        assert stored[0] == "msgpack+zlib"
        assert len(stored[1]) < len(data)
        assert unpack_body(*stored) == ("msgpack", data)

    def test_small_body_is_never_compressed(self) -> None:
        """Below 256 bytes a payload is stored as is, however well it compresses."""
        assert pack_body("msgpack", b"a" * 255) == ("msgpack", b"a" * 255)
        assert pack_body("msgpack", b"a" * 256)[0] == "msgpack+zlib"

    def test_incompressible_body_is_stored_plain(self) -> None:
        """A payload that zlib does not shrink by a tenth is stored as is."""
        data = incompressible(4096)
        assert pack_body("json", data) == ("json", data)
        assert unpack_body("json", data) == ("json", data)

    def test_compression_must_save_a_tenth(self) -> None:
        """A payload that compresses by less than 10% is stored as is."""
        data = incompressible(900) + b"a" * 100  # compresses by a little under a tenth
        assert len(zlib.compress(data, 6)) * 10 >= len(data) * 9
        assert len(zlib.compress(data, 6)) < len(data)
        assert pack_body("msgpack", data) == ("msgpack", data)

    def test_corrupt_compressed_body_raises_format_error(self) -> None:
        """A compressed payload that does not inflate is reported as corrupt."""
        type_, data = pack_body("msgpack", b"x" * 1000)
        with pytest.raises(FormatError, match="corrupt compressed body"):
            unpack_body(type_, data[:-4] + b"\x00\x00\x00\x00")
        with pytest.raises(FormatError, match="corrupt compressed body"):
            unpack_body(type_, b"not zlib")


class TestReferences:
    """References in checkpoints, escaped user dicts and plain values."""

    def test_list_reference_is_small_and_namespaced(self) -> None:
        """A list reference holds a digest and a count under our own key."""
        ref = list_ref(b"l" * 16, 50)
        assert set(ref) == {MARKER_KEY, "list", "n"}
        assert read_ref(ref) == ("list", (b"l" * 16, 50))

    def test_value_reference(self) -> None:
        """A value reference holds a digest under our own key."""
        ref = value_ref(b"v" * 16)
        assert set(ref) == {MARKER_KEY, "digest"}
        assert read_ref(ref) == ("value", b"v" * 16)

    def test_plain_values_are_not_references(self) -> None:
        """Values without our key, at the top level, are plain."""
        for value in ("x", 3, None, [], {"a": 1}, [{MARKER_KEY: "messages/1"}]):
            assert read_ref(value) is None
            assert escape(value) is value

    def test_user_dict_with_marker_is_escaped(self) -> None:
        """A user dict that carries our key is wrapped and read back as the user's."""
        for user in (
            {MARKER_KEY: "mine"},
            {MARKER_KEY: "messages/1", "list": "00" * 16, "n": 1},  # looks like ours
            {MARKER_KEY: "escaped/1", "value": 1},
        ):
            escaped = escape(user)
            assert escaped != user
            assert read_ref(escaped) == ("escaped", user)

    def test_escaping_is_idempotent_on_reading(self) -> None:
        """An escaped value escaped again reads back as the once-escaped value."""
        user = {MARKER_KEY: "mine"}
        twice = escape(escape(user))
        assert read_ref(twice) == ("escaped", escape(user))

    def test_unknown_marker_dict_is_plain(self) -> None:
        """A dict with our key but no known kind (written before escaping) is plain."""
        assert read_ref({MARKER_KEY: "mine", "a": 1}) is None
        assert read_ref({MARKER_KEY: "escaped/1"}) is None

    @pytest.mark.parametrize(
        "ref",
        [
            {MARKER_KEY: "messages/1", "list": "not hex", "n": 1},
            {MARKER_KEY: "messages/1"},
            {MARKER_KEY: "messages/1", "list": "00" * 16, "n": "many"},
            {MARKER_KEY: "value/1", "digest": 7},
        ],
    )
    def test_corrupt_reference_raises_format_error(self, ref: dict[str, object]) -> None:
        """One of our references that does not parse is a corrupt record."""
        with pytest.raises(FormatError, match="corrupt reference"):
            read_ref(ref)


class TestRefs:
    """The refs record of a checkpoint: the lists and values it references."""

    def test_round_trip(self) -> None:
        """Lists and values come back apart, in order."""
        lists, values = digests(3, "l"), digests(2, "v")
        assert decode_refs(encode_refs(lists, values)) == (lists, values)

    def test_empty(self) -> None:
        """A checkpoint that references nothing has an empty record."""
        assert encode_refs([], []) == b""
        assert decode_refs(b"") == ([], [])

    def test_truncated_record_raises_format_error(self) -> None:
        """A record cut inside an entry is corrupt."""
        with pytest.raises(FormatError, match="corrupt refs record"):
            decode_refs(encode_refs(digests(2), [])[:-1])


class TestIsMessageList:
    """Which channel values are message lists."""

    def test_message_lists(self) -> None:
        """Non-empty lists made only of LangChain messages of any type."""
        assert is_message_list([HumanMessage("hi")])
        assert is_message_list(
            [HumanMessage("q"), AIMessage("a"), ToolMessage("r", tool_call_id="c")]
        )

    def test_other_values(self) -> None:
        """Empty lists, tuples, list subclasses and mixed lists are not message lists."""

        class Messages(list):  # type: ignore[type-arg]
            pass

        assert not is_message_list([])
        assert not is_message_list((HumanMessage("hi"),))
        assert not is_message_list(Messages([HumanMessage("hi")]))
        assert not is_message_list([HumanMessage("hi"), {"not": "a message"}])
        assert not is_message_list(["hi"])
        assert not is_message_list(HumanMessage("hi"))
