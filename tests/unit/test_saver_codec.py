"""Linear storage codec: content-addressed bodies, snapshot and delta list records."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_stm.checkpoint._codec import (
    CHUNK_SIZE,
    MARKER_KEY,
    BodySet,
    Encoded,
    ListRow,
    MessageCodec,
    decode_ops,
    encode_ops,
    expand_all,
    is_chunk,
    is_marker,
    is_message_list,
    make_pack,
    message_digest,
    msgpack_array,
    split_digests,
)

SERDE = JsonPlusSerializer()
KEY = ("t1", "", "messages")


def conversation(n: int) -> list[BaseMessage]:
    return [
        HumanMessage(id=f"h{i}", content=f"q{i}")
        if i % 2 == 0
        else AIMessage(id=f"a{i}", content=f"r{i}")
        for i in range(n)
    ]


def encode(codec: MessageCodec, messages: list[BaseMessage], install: bool = True) -> Encoded:
    enc = codec.encode(SERDE, "t1", "", {"messages": messages}, None)
    if install:
        codec.install(enc.updates)
    return enc


def rebuild(encodings: list[Encoded], marker: dict[str, object]) -> list[BaseMessage]:
    rows = {r.digest: r for e in encodings for r in e.lists}
    bodies = {b.digest: (b.type, b.data) for e in encodings for b in e.bodies}
    digest = bytes.fromhex(str(marker["list"]))
    expanded, _ = expand_all(rows, [digest])
    return [SERDE.loads_typed(bodies[d]) for d in expanded[digest][0]]


class TestOps:
    """The binary list operations."""

    def test_ranges_and_literals_round_trip(self) -> None:
        """Copy ranges come from the snapshot, literals are added in place."""
        base = [bytes([i]) * 16 for i in range(5)]
        new = b"\xff" * 16
        ops = encode_ops([(0, 2), new, (3, 5)])
        assert decode_ops(ops, base) == [base[0], base[1], new, base[3], base[4]]

    def test_snapshot_is_plain_concatenation(self) -> None:
        """A snapshot record is the digests back to back."""
        digests = [bytes([i]) * 16 for i in range(3)]
        assert split_digests(b"".join(digests)) == digests

    def test_msgpack_array_headers_decode_as_lists(self) -> None:
        """Separately serialized bodies decode as one list for every array header size."""
        for n in (0, 15, 16, 70_000):
            payloads = [SERDE.dumps_typed(i)[1] for i in range(n)]
            assert SERDE.loads_typed(("msgpack", msgpack_array(payloads))) == list(range(n))


class TestEncode:
    """Encoding message lists into references and rows."""

    def test_only_message_lists_are_replaced(self) -> None:
        """Other channel values, empty lists and mixed lists pass through unchanged."""
        codec = MessageCodec()
        values = {"messages": conversation(2), "goal": "g", "empty": [], "mixed": [1, "x"]}
        enc = codec.encode(SERDE, "t1", "", values, None)
        assert is_marker(enc.values["messages"])
        assert enc.values["goal"] == "g"
        assert enc.values["empty"] == []
        assert enc.values["mixed"] == [1, "x"]
        assert not is_message_list([])
        assert not is_message_list(("a",))

    def test_each_body_is_written_once(self) -> None:
        """Appending to a list stores only the new messages."""
        codec = MessageCodec()
        messages = conversation(4)
        first = encode(codec, messages)
        second = encode(codec, [*messages, AIMessage(id="a4", content="new")])
        assert len(first.bodies) == 4
        assert [b.message_id for b in second.bodies] == ["a4"]

    def test_an_append_keys_the_list_like_a_cold_encode(self) -> None:
        """The list digest hashed incrementally on appends equals the one a process that
        has seen nothing computes, so lists stay content-addressed across workers."""
        warm = MessageCodec()
        messages = conversation(3)
        encode(warm, messages)
        for i in range(3, 40):
            messages = [*messages, HumanMessage(id=f"x{i}", content=f"more {i}")]
            if i % 5 == 0:
                written = {id(messages[0]): messages[0]}  # a node returned an old object
                warm.forget_messages("t1", "", "messages", written.values())
            marker = encode(warm, messages).values["messages"]
            cold = encode(MessageCodec(), list(messages)).values["messages"]
            assert marker["list"] == cold["list"]

    def test_replaced_message_is_a_new_body(self) -> None:
        """A message replaced by id (add_messages semantics) is stored again."""
        codec = MessageCodec()
        messages = conversation(3)
        first = encode(codec, messages)
        edited = [messages[0], AIMessage(id="a1", content="edited"), messages[2]]
        enc = encode(codec, edited)
        assert [b.message_id for b in enc.bodies] == ["a1"]
        rebuilt = rebuild([first, enc], enc.values["messages"])
        assert [m.content for m in rebuilt] == ["q0", "edited", "q2"]

    def test_lists_round_trip_through_deltas_and_snapshots(self) -> None:
        """Every list, delta or snapshot, rebuilds exactly, including removals."""
        codec = MessageCodec(delta_limit=4)
        encodings: list[Encoded] = []
        messages: list[BaseMessage] = []
        for i in range(30):
            messages = [*messages, HumanMessage(id=f"m{i}", content=str(i))]
            if i % 7 == 6:
                messages = messages[2:]
            enc = encode(codec, messages)
            encodings.append(enc)
            assert rebuild(encodings, enc.values["messages"]) == messages
        kinds = {row.base is None for e in encodings for row in e.lists}
        assert kinds == {True, False}

    def test_deltas_point_at_snapshots_only(self) -> None:
        """A read needs at most two list records, however long the thread."""
        codec = MessageCodec(delta_limit=8)
        encodings = [encode(codec, conversation(n)) for n in range(1, 60)]
        snapshots = {r.digest for e in encodings for r in e.lists if r.base is None}
        assert all(r.base in snapshots for e in encodings for r in e.lists if r.base)

    def test_failed_write_teaches_the_cache_nothing(self) -> None:
        """Bodies of a write that was not installed are written again next time."""
        codec = MessageCodec()
        messages = conversation(3)
        encode(codec, messages, install=False)
        again = encode(codec, messages)
        assert len(again.bodies) == 3

    def test_marker_is_small_and_namespaced(self) -> None:
        """The reference holds a digest and a count, under our own key."""
        enc = encode(MessageCodec(), conversation(50))
        marker = enc.values["messages"]
        assert set(marker) == {MARKER_KEY, "list", "n"}
        assert marker["n"] == 50


class TestChunks:
    """Long snapshots share their full chunks instead of repeating every digest."""

    def test_append_only_thread_writes_each_chunk_once(self) -> None:
        """Chunks are written once; a snapshot holds chunk digests and its tail."""
        codec = MessageCodec()
        encodings = [encode(codec, conversation(n)) for n in range(1, 3 * CHUNK_SIZE + 40)]
        chunks = [r.digest for e in encodings for r in e.lists if is_chunk(r)]
        assert len(chunks) == len(set(chunks)) == 3
        for enc in encodings:
            for row in enc.lists:
                if row.base is None:
                    full, tail = divmod(row.length, CHUNK_SIZE)
                    assert len(row.ops) == 16 * (full + tail)
        last = encodings[-1]
        assert rebuild(encodings, last.values["messages"]) == conversation(3 * CHUNK_SIZE + 39)

    def test_long_lists_round_trip_when_trimmed_and_edited(self) -> None:
        """Lists that are not appends (trims, edits) rebuild exactly from chunks."""
        codec = MessageCodec(delta_limit=6)
        encodings: list[Encoded] = []
        messages = conversation(2 * CHUNK_SIZE + 10)
        for i in range(40):
            messages = [*messages, HumanMessage(id=f"x{i}", content=str(i))]
            if i % 9 == 8:
                messages = messages[5:]
            if i % 13 == 12:
                messages = [*messages[:100], AIMessage(id="a1", content=f"e{i}"), *messages[101:]]
            enc = encode(codec, messages)
            encodings.append(enc)
            assert rebuild(encodings, enc.values["messages"]) == messages

    def test_a_missing_chunk_leaves_the_list_out(self) -> None:
        """A snapshot whose chunk is missing is not expanded (the caller reports it)."""
        enc = encode(MessageCodec(), conversation(CHUNK_SIZE + 1))
        digest = bytes.fromhex(str(enc.values["messages"]["list"]))
        rows: dict[bytes, ListRow] = {r.digest: r for r in enc.lists if not is_chunk(r)}
        expanded, _ = expand_all(rows, [digest])
        assert expanded == {}

    def test_a_read_teaches_which_chunks_are_stored(self) -> None:
        """After ``remember`` (a read), the next snapshot does not write old chunks again."""
        first = encode(MessageCodec(), conversation(CHUNK_SIZE + 5))
        digest = bytes.fromhex(str(first.values["messages"]["list"]))
        expanded, _ = expand_all({r.digest: r for r in first.lists}, [digest])
        entries, snapshot, snapshot_entries, ops = expanded[digest]
        codec = MessageCodec(delta_limit=2)
        messages = conversation(CHUNK_SIZE + 5)
        codec.remember(KEY, messages, entries, snapshot, snapshot_entries, ops)
        again = encode(codec, conversation(CHUNK_SIZE + 9))
        assert [r for r in again.lists if r.base is None]
        assert not [r for r in again.lists if is_chunk(r)]


def test_a_list_with_a_non_message_inside_is_left_alone() -> None:
    """Only lists made entirely of messages are replaced by a reference."""
    codec = MessageCodec()
    value = [
        HumanMessage(id="a", content="x"),
        {"not": "a message"},
        AIMessage(id="b", content="y"),
    ]
    enc = codec.encode(SERDE, "t1", "", {"messages": value}, None)
    assert enc.values["messages"] is value
    assert enc.bodies == []
    assert enc.lists == []


def stored(messages: list[BaseMessage]) -> list[tuple[bytes, str, bytes]]:
    """``(digest, type, payload)`` of each message, as a write stores it."""
    out = []
    for m in messages:
        type_, data = SERDE.dumps_typed(m)
        out.append((message_digest(type_, data), type_, data))
    return out


def decode(units: list[tuple[str, bytes, int]]) -> list[BaseMessage]:
    """Decode what BodySet.assemble returns, as STMSaver does."""
    out: list[BaseMessage] = []
    for type_, payload, n in units:
        value = SERDE.loads_typed((type_, payload))
        if n < 0:
            out.append(value)
        else:
            assert len(value) == n
            out.extend(value)
    return out


class TestPacks:
    """Bodies packed into segments, and lists assembled from them."""

    def body_set(self, messages: list[BaseMessage], pack_size: int) -> BodySet:
        """Pack all but the last few bodies ``pack_size`` at a time, in list order."""
        rows = stored(messages)
        order = [d for d, _, _ in rows]
        bodies = BodySet()
        full = len(rows) - len(rows) % pack_size
        for i in range(0, full, pack_size):
            # Packs are made from loose rows in any order; make_pack restores list order.
            pack = make_pack(rows[i : i + pack_size][::-1], order)
            bodies.add(pack.digests, pack.ends, pack.types, pack.data)
        for digest, type_, data in rows[full:]:
            bodies.add(digest, None, type_, data)
        return bodies

    def test_pack_is_a_msgpack_array_in_list_order(self) -> None:
        """A pack's payload decodes as the list of its bodies, as written."""
        messages = conversation(5)
        rows = stored(messages)
        pack = make_pack(rows[::-1], [d for d, _, _ in rows])
        assert pack.types == "msgpack"
        assert split_digests(pack.digests) == [d for d, _, _ in rows]
        assert SERDE.loads_typed(("msgpack", pack.data)) == messages

    def test_append_only_list_is_whole_segments(self) -> None:
        """A list that is packs then loose bodies is one unit per segment, packs unsplit."""
        messages = conversation(23)
        bodies = self.body_set(messages, 8)
        units = bodies.assemble([d for d, _, _ in stored(messages)])
        assert [n for _, _, n in units] == [8, 8, -1, -1, -1, -1, -1, -1, -1]
        assert units[0][1] is bodies.segments[0][3]  # the stored payload, not a copy
        assert decode(units) == messages

    def test_any_list_of_stored_bodies_is_assembled(self) -> None:
        """Trimmed, reordered, repeated and forked lists are cut out of the packs."""
        messages = conversation(23)
        bodies = self.body_set(messages, 8)
        digests = [d for d, _, _ in stored(messages)]
        for picked in (
            list(range(5, 23)),  # front trimmed: starts inside a pack
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13],  # a message removed
            [22, 3, 4, 5, 0, 0],  # reordered and repeated
            [9],
        ):
            units = bodies.assemble([digests[i] for i in picked])
            assert decode(units) == [messages[i] for i in picked]

    def test_a_body_stored_twice_is_harmless(self) -> None:
        """Two writers may pack the same body twice; the list reads the same."""
        messages = conversation(10)
        bodies = self.body_set(messages, 4)
        digest, type_, data = stored(messages)[1]
        bodies.add(digest, None, type_, data)
        other = make_pack(stored(messages)[2:6], [])
        bodies.add(other.digests, other.ends, other.types, other.data)
        assert decode(bodies.assemble([d for d, _, _ in stored(messages)])) == messages

    def test_mixed_serde_types_decode_one_by_one(self) -> None:
        """A pack whose bodies are not all msgpack is split body by body."""
        rows = [(b"a" * 16, "json", b'"x"'), (b"b" * 16, "msgpack", SERDE.dumps_typed("y")[1])]
        pack = make_pack(rows, [b"a" * 16, b"b" * 16])
        bodies = BodySet()
        bodies.add(pack.digests, pack.ends, pack.types, pack.data)
        units = bodies.assemble([b"b" * 16, b"a" * 16])
        assert [(t, n) for t, _, n in units] == [("msgpack", -1), ("json", -1)]
        assert units[1][1] == b'"x"'

    def test_missing_body_is_a_key_error(self) -> None:
        """A list whose bodies are not all stored raises KeyError (reported by STMSaver)."""
        bodies = self.body_set(conversation(4), 2)
        with pytest.raises(KeyError):
            bodies.assemble([b"z" * 16])

    def test_cold_encode_is_flagged(self) -> None:
        """Encoding without cached knowledge asks the store to drop bodies it has."""
        codec = MessageCodec()
        messages = conversation(3)
        assert encode(codec, messages).cold
        assert not encode(codec, [*messages, AIMessage(id="a3", content="r3")]).cold
