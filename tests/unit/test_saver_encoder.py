"""The encoder: message lists into references and rows, value-keyed caches, decoding."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_stm.checkpoint._encoder import (
    Encoder,
    Head,
    Heads,
    Loaded,
    MessageCache,
    WriteSet,
    version_owner,
)
from langgraph_stm.checkpoint._format import (
    CHUNK_SIZE,
    MARKER_KEY,
    BodyRow,
    FormatError,
    ListRow,
    chunk_refs,
    decode_refs,
    encode_refs,
    escape,
    expand_list,
    message_digest,
    read_ref,
    unpack_body,
)

SERDE = JsonPlusSerializer()
THREAD, NS = "t1", ""


def conversation(n: int, start: int = 0) -> list[BaseMessage]:
    """``n`` alternating human and AI messages with ids ``h<i>`` / ``a<i>``."""
    return [
        HumanMessage(id=f"h{i}", content=f"q{i}")
        if i % 2 == 0
        else AIMessage(id=f"a{i}", content=f"r{i}")
        for i in range(start, start + n)
    ]


def list_digest_of(write: WriteSet, channel: str = "messages") -> bytes:
    """The list digest the reference of ``channel`` names."""
    ref = read_ref(write.values[channel])
    assert ref is not None
    assert ref[0] == "list"
    return ref[1][0]


class Store:
    """Our tables in memory, with the database's rules: duplicates are ignored, and a
    snapshot replaces a delta of the same digest (never the reverse)."""

    def __init__(self) -> None:
        self.bodies: dict[bytes, BodyRow] = {}
        self.lists: dict[bytes, ListRow] = {}
        self.values: dict[bytes, tuple[str, bytes]] = {}

    def add(self, write: WriteSet, rows: tuple[list[BodyRow], list[ListRow]] | None = None) -> None:
        """Store ``write``'s rows (or ``rows``, e.g. what ``write.cold()`` returns)."""
        bodies, lists = rows if rows is not None else (write.bodies, write.lists)
        for body in bodies:
            self.bodies.setdefault(body.digest, body)
        for row in lists:
            old = self.lists.get(row.digest)
            if old is None or (row.base is None and old.base is not None):
                self.lists[row.digest] = row
        for value in write.value_rows:
            self.values.setdefault(value.digest, (value.type, value.data))

    def loaded(self) -> Loaded:
        """Everything stored, as a read would fetch it (bodies unpacked)."""
        bodies = {d: unpack_body(b.type, b.data) for d, b in self.bodies.items()}
        return Loaded(dict(self.lists), bodies, dict(self.values))

    def rebuild(self, reference: Any) -> list[BaseMessage]:
        """The message list ``reference`` names, from the list records and the bodies."""
        ref = read_ref(reference)
        assert ref is not None
        assert ref[0] == "list"
        digest, n = ref[1]
        entries, *_ = expand_list(digest, self.lists)
        assert len(entries) == n
        return [
            SERDE.loads_typed(unpack_body(self.bodies[d].type, self.bodies[d].data))
            for d in entries
        ]


def decode(
    store: Store,
    values: dict[str, Any],
    encoder: Encoder | None = None,
    checkpoint_id: str | None = None,
    *,
    remember: bool = False,
) -> dict[str, Any]:
    """Decode ``values`` as a read does (``load_plan`` then ``decode_values``)."""
    encoder = encoder if encoder is not None else Encoder(SERDE)
    lists, _ = encoder.references(values)
    expanded = {d: expand_list(d, store.lists) for d in lists.values()}
    return encoder.decode_values(
        THREAD, NS, checkpoint_id, values, expanded, store.loaded(), remember=remember
    )


class Thread:
    """One thread written through an encoder as STMSaver does: each checkpoint's parent
    is the previous one, and a write is installed once its rows are stored."""

    def __init__(self, encoder: Encoder | None = None, **options: Any) -> None:
        self.encoder = encoder if encoder is not None else Encoder(SERDE, **options)
        self.store = Store()
        self.writes: list[WriteSet] = []
        self.head: str | None = None
        self._count = 0

    def put(
        self,
        values: dict[str, Any],
        *,
        install: bool = True,
        parent: str | None = "head",
        channels: list[str] | None = None,
        versions: dict[str, Any] | None = None,
    ) -> WriteSet:
        """Encode the next checkpoint; store and install it unless ``install`` is false."""
        self._count += 1
        checkpoint_id = f"c{self._count:05d}"
        parent_id = self.head if parent == "head" else parent
        write = self.encoder.encode(
            THREAD, NS, checkpoint_id, parent_id, values, channels, versions
        )
        self.writes.append(write)
        if install:
            self.store.add(write)
            self.encoder.installed(write)
            self.head = checkpoint_id
        return write

    def messages(self, messages: list[BaseMessage], **options: Any) -> WriteSet:
        """Encode a checkpoint whose only channel is ``messages``."""
        return self.put({"messages": messages}, **options)


def snapshots(write: WriteSet) -> list[ListRow]:
    """The snapshot records ``write`` stores."""
    return [r for r in write.lists if r.base is None]


def deltas(write: WriteSet) -> list[ListRow]:
    """The delta records ``write`` stores."""
    return [r for r in write.lists if r.base]


def chunks(write: WriteSet) -> list[ListRow]:
    """The chunk rows ``write`` stores."""
    return [r for r in write.lists if r.base == b""]


class TestReferences:
    """Which channel values a checkpoint write replaces by references."""

    def test_only_message_lists_are_replaced(self) -> None:
        """Other channel values, empty lists, tuples and mixed lists pass through unchanged."""
        thread = Thread()
        values = {
            "messages": conversation(2),
            "goal": "g",
            "empty": [],
            "mixed": [1, "x"],
            "tuple": tuple(conversation(2)),
            "big": "x" * 5000,
        }
        write = thread.put(values)
        assert read_ref(write.values["messages"])[0] == "list"  # type: ignore[index]
        for channel in ("goal", "empty", "mixed", "tuple", "big"):
            assert write.values[channel] is values[channel]
        assert write.value_rows == []

    def test_a_list_with_a_non_message_inside_is_left_alone(self) -> None:
        """Only lists made entirely of messages are replaced by a reference."""
        value = [
            HumanMessage(id="a", content="x"),
            {"not": "a message"},
            AIMessage(id="b", content="y"),
        ]
        write = Thread().put({"messages": value})
        assert write.values["messages"] is value
        assert (write.bodies, write.lists, write.requires) == ([], [], [])

    def test_reference_is_small_and_namespaced(self) -> None:
        """The reference holds a digest and a count, under our own key."""
        write = Thread().messages(conversation(50))
        ref = write.values["messages"]
        assert set(ref) == {MARKER_KEY, "list", "n"}
        assert ref["n"] == 50

    def test_the_input_is_not_modified(self) -> None:
        """Encoding returns new channel values; the checkpoint's own stay as they were."""
        values = {"messages": conversation(3), "cfg": {MARKER_KEY: "mine"}}
        before = dict(values)
        Thread().put(values)
        assert values == before
        assert values["messages"] is before["messages"]

    def test_only_named_channels_are_encoded(self) -> None:
        """With ``channels`` (savers that store new versions only), others pass through."""
        messages, other = conversation(2), conversation(2, start=10)
        write = Thread().put(
            {"messages": messages, "other": other, "cfg": {MARKER_KEY: 1}},
            channels=["messages", "missing"],
        )
        assert read_ref(write.values["messages"])[0] == "list"  # type: ignore[index]
        assert write.values["other"] is other
        assert write.values["cfg"] == {MARKER_KEY: 1}
        assert {b.message_id for b in write.bodies} == {"h0", "a1"}

    def test_every_message_channel_gets_its_own_list(self) -> None:
        """Two message channels are two lists, keyed by their own content."""
        write = Thread().put({"messages": conversation(2), "scratch": conversation(3, start=5)})
        assert list_digest_of(write) != list_digest_of(write, "scratch")
        assert len(snapshots(write)) == 2


class TestBodies:
    """Each message body is written once per thread; any change makes a new body."""

    def test_each_body_is_written_once(self) -> None:
        """Appending to a list stores only the new messages."""
        thread = Thread()
        messages = conversation(4)
        first = thread.messages(messages)
        second = thread.messages([*messages, AIMessage(id="a4", content="new")])
        assert len(first.bodies) == 4
        assert [b.message_id for b in second.bodies] == ["a4"]

    def test_the_same_list_again_writes_nothing(self) -> None:
        """A checkpoint whose list equals its parent's writes no body and no record."""
        thread = Thread()
        messages = conversation(5)
        first = thread.messages(messages)
        again = thread.messages(list(messages))
        assert list_digest_of(again) == list_digest_of(first)
        assert (again.bodies, again.lists) == ([], [])

    def test_messages_without_ids_are_content_addressed(self) -> None:
        """A message without an id is serialized each time but stored only once."""
        thread = Thread()
        messages = [HumanMessage("no id"), AIMessage("none either")]
        thread.messages(messages)
        again = thread.messages([*messages, HumanMessage("third")])
        assert [b.message_id for b in again.bodies] == [None]
        assert thread.store.rebuild(again.values["messages"])[-1].content == "third"

    def test_equal_messages_share_a_body(self) -> None:
        """Two equal message objects are one body, even in one list."""
        write = Thread().messages([HumanMessage("x", id="m"), HumanMessage("x", id="m")])
        assert len(write.bodies) == 1
        assert write.values["messages"]["n"] == 2

    def test_body_is_the_serialized_message(self) -> None:
        """A body row is keyed by the digest of the message's serde form, packed."""
        message = HumanMessage(id="h", content="word " * 200)
        (body,) = Thread().messages([message]).bodies
        type_, data = SERDE.dumps_typed(message)
        assert body.digest == message_digest(type_, data)
        assert body.message_id == "h"
        assert body.type == type_ + "+zlib"
        assert unpack_body(body.type, body.data) == (type_, data)

    def test_replaced_message_is_a_new_body(self) -> None:
        """A message replaced by id (add_messages semantics) is stored again."""
        thread = Thread()
        messages = conversation(3)
        thread.messages(messages)
        edited = [messages[0], AIMessage(id="a1", content="edited"), messages[2]]
        write = thread.messages(edited)
        assert [b.message_id for b in write.bodies] == ["a1"]
        assert [m.content for m in thread.store.rebuild(write.values["messages"])] == [
            "q0",
            "edited",
            "q2",
        ]

    @pytest.mark.parametrize(
        "edit",
        [
            pytest.param(lambda m: setattr(m, "content", "x"), id="content"),
            pytest.param(lambda m: m.additional_kwargs.__setitem__("k", 1), id="kwargs"),
            pytest.param(lambda m: m.response_metadata.__setitem__("k", [1]), id="metadata"),
            pytest.param(lambda m: m.tool_calls[0]["args"].__setitem__("q", "new"), id="tool-arg"),
            pytest.param(lambda m: m.tool_calls.append(m.tool_calls[0]), id="tool-call-added"),
        ],
    )
    def test_message_edited_in_place_is_a_new_body(self, edit: Any) -> None:
        """The same object edited in place (even deep inside) is serialized and stored
        again: messages are found by value, never by identity."""
        thread = Thread()
        message = AIMessage(
            id="a1",
            content="old",
            tool_calls=[
                {"name": "search", "args": {"q": "old"}, "id": "call1", "type": "tool_call"}
            ],
        )
        messages = [HumanMessage(id="h0", content="hi"), message]
        first = thread.messages(messages)
        expected = SERDE.loads_typed(SERDE.dumps_typed(message))
        edit(message)
        assert message != expected
        second = thread.messages(messages)
        assert [b.message_id for b in second.bodies] == ["a1"]
        assert list_digest_of(second) != list_digest_of(first)
        assert thread.store.rebuild(second.values["messages"])[1] == message
        assert thread.store.rebuild(first.values["messages"])[1] == expected

    def test_an_edit_undone_is_the_old_body(self) -> None:
        """A message edited then restored has its first digest again: same body, same list."""
        thread = Thread()
        messages = conversation(3)
        first = thread.messages(messages)
        messages[1].content = "temporary"
        thread.messages(messages)
        messages[1].content = "r1"
        third = thread.messages(messages)
        assert {b.digest for b in third.bodies} <= {b.digest for b in first.bodies}
        assert list_digest_of(third) == list_digest_of(first)

    def test_edits_after_encoding_do_not_reach_the_cache(self) -> None:
        """The cache holds a copy: editing a message after its write is seen as an edit."""
        thread = Thread()
        message = HumanMessage(id="h", content="one", additional_kwargs={"n": [1]})
        thread.messages([message])
        message.additional_kwargs["n"].append(2)
        write = thread.messages([message])
        assert [b.message_id for b in write.bodies] == ["h"]

    def test_a_fresh_encoder_computes_the_same_digests(self) -> None:
        """List digests hashed on appends equal those a process that has seen nothing
        computes, so lists stay content-addressed across workers."""
        warm = Thread()
        messages = conversation(3)
        for i in range(3, 40):
            messages = [*messages, HumanMessage(id=f"x{i}", content=f"more {i}")]
            if i % 5 == 0:
                messages[0].content = f"edited {i}"
            write = warm.messages(messages)
            cold = Thread().messages([m.model_copy() for m in messages])
            assert list_digest_of(write) == list_digest_of(cold)


class TestLists:
    """List records: deltas against snapshots, chunks, and lists rebuilt from the rows."""

    def test_an_append_writes_a_delta(self) -> None:
        """With the head known, an append writes its new body and one delta record."""
        thread = Thread()
        messages = conversation(5)
        first = thread.messages(messages)
        second = thread.messages([*messages, HumanMessage(id="h5", content="new")])
        (snapshot,) = first.lists
        (delta,) = second.lists
        assert snapshot.base is None
        assert (delta.base, delta.length) == (snapshot.digest, 6)
        assert [b.message_id for b in second.bodies] == ["h5"]
        assert thread.store.rebuild(second.values["messages"])[-1].content == "new"

    def test_lists_round_trip_through_deltas_and_snapshots(self) -> None:
        """Every list, delta or snapshot, rebuilds exactly, including removals."""
        thread = Thread(delta_limit=4)
        messages: list[BaseMessage] = []
        for i in range(30):
            messages = [*messages, HumanMessage(id=f"m{i}", content=str(i))]
            if i % 7 == 6:
                messages = messages[2:]
            write = thread.messages(messages)
            assert thread.store.rebuild(write.values["messages"]) == messages
        kinds = {row.base is None for w in thread.writes for row in w.lists}
        assert kinds == {True, False}

    def test_lists_round_trip_through_edits_in_place(self) -> None:
        """Appends, trims, in-place edits and reorderings all rebuild exactly."""
        thread = Thread(delta_limit=3)
        messages = conversation(6)
        for i in range(40):
            messages = [*messages, AIMessage(id=f"x{i}", content=str(i))]
            if i % 4 == 1:
                messages[len(messages) // 2].content = f"edit {i}"
            if i % 6 == 2:
                messages[0].additional_kwargs[f"k{i}"] = {"nested": [i]}
            if i % 9 == 3:
                messages = messages[3:]
            if i % 11 == 5:
                messages = [*messages[-2:], *messages[:-2]]
            write = thread.messages(messages)
            assert thread.store.rebuild(write.values["messages"]) == messages

    def test_deltas_point_at_snapshots_only(self) -> None:
        """A read needs at most two list records, however long the thread."""
        thread = Thread(delta_limit=8)
        for n in range(1, 60):
            thread.messages(conversation(n))
        snapshot_digests = {r.digest for w in thread.writes for r in snapshots(w)}
        assert all(r.base in snapshot_digests for w in thread.writes for r in deltas(w))
        for write in thread.writes:
            rows = thread.store.lists
            digest = list_digest_of(write)
            base = rows[digest].base or digest
            assert rows[base].base is None

    def test_append_only_thread_writes_each_chunk_once(self) -> None:
        """Chunks are written once; a snapshot holds chunk digests and its tail."""
        thread = Thread()
        sizes = range(1, 3 * CHUNK_SIZE + 40, 3)
        for n in sizes:
            thread.messages(conversation(n))
        written = [r.digest for w in thread.writes for r in chunks(w)]
        assert len(written) == len(set(written)) == 3
        for write in thread.writes:
            for row in snapshots(write):
                full, tail = divmod(row.length, CHUNK_SIZE)
                assert len(row.ops) == 16 * (full + tail)
        last = thread.writes[-1]
        assert thread.store.rebuild(last.values["messages"]) == conversation(sizes[-1])

    def test_long_lists_round_trip_when_trimmed_and_edited(self) -> None:
        """Lists of 300+ messages that are not appends (trims, edits) rebuild from chunks."""
        thread = Thread(delta_limit=6)
        messages = conversation(2 * CHUNK_SIZE + 10)
        for i in range(40):
            messages = [*messages, HumanMessage(id=f"x{i}", content=str(i))]
            if i % 9 == 8:
                messages = messages[5:]
            if i % 13 == 12:
                messages = [*messages[:100], AIMessage(id="a1", content=f"e{i}"), *messages[101:]]
            if i % 7 == 3:
                messages[200].content = f"in place {i}"
            write = thread.messages(messages)
            assert thread.store.rebuild(write.values["messages"]) == messages
        assert any(chunks(w) for w in thread.writes[1:])

    def test_many_literals_write_a_new_snapshot(self) -> None:
        """Beyond ``delta_limit`` new digests, the list is stored as a snapshot again."""
        thread = Thread(delta_limit=3)
        messages = conversation(4)
        first = thread.messages(messages)
        small = thread.messages([*messages, *conversation(3, start=4)])
        big = thread.messages([*messages, *conversation(4, start=10)])
        assert [r.base for r in small.lists] == [list_digest_of(first)]
        assert [r.base for r in big.lists] == [None]

    def test_a_list_shrunk_below_half_its_snapshot_gets_its_own_snapshot(self) -> None:
        """A trimmed list under half its snapshot's length is a snapshot, not a delta, so
        the long snapshot can be reclaimed."""
        thread = Thread()
        messages = conversation(20)
        first = thread.messages(messages)
        half = thread.messages(messages[10:])
        short = thread.messages(messages[11:])
        assert [r.base for r in half.lists] == [list_digest_of(first)]
        assert [r.base for r in short.lists] == [None]
        assert short.bodies == []
        after = thread.messages([*messages[11:], HumanMessage(id="n", content="n")])
        assert [r.base for r in after.lists] == [list_digest_of(short)]
        assert thread.store.rebuild(after.values["messages"]) == [
            *messages[11:],
            HumanMessage(id="n", content="n"),
        ]

    def test_a_new_snapshot_does_not_rewrite_the_parents_chunks(self) -> None:
        """A snapshot written after a snapshot with the same first chunk writes only its
        own record: the chunk is stored already."""
        thread = Thread(delta_limit=2)
        messages = conversation(CHUNK_SIZE + 5)
        thread.messages(messages)
        write = thread.messages([*messages, *conversation(4, start=900)])
        assert snapshots(write)
        assert not chunks(write)
        assert thread.store.rebuild(write.values["messages"])[-1].content == "r903"


class TestColdWrites:
    """What a write relies on, and the cold rows when it cannot rely on anything."""

    def test_first_write_is_cold(self) -> None:
        """Without a known parent, a write is a full snapshot with every body."""
        write = Thread().messages(conversation(3))
        assert len(write.bodies) == 3
        assert [r.base for r in write.lists] == [None]
        assert write.requires == []
        assert write.cold is None

    def test_failed_write_teaches_nothing(self) -> None:
        """A write that was not installed leaves no head: the next write with the same
        parent is cold again (full snapshot, every body)."""
        thread = Thread()
        messages = conversation(3)
        thread.messages(messages, install=False, parent="c0")
        again = thread.messages([*messages, HumanMessage(id="h3", content="q3")], parent="c0")
        assert len(again.bodies) == 4
        assert [r.base for r in again.lists] == [None]
        assert again.requires == []

    def test_failed_warm_write_leaves_the_parent_as_head(self) -> None:
        """After a failed write the head is still its parent: a retry writes the new body
        again, and a child of the failed checkpoint is cold."""
        thread = Thread()
        messages = conversation(3)
        first = thread.messages(messages)
        grown = [*messages, HumanMessage(id="h3", content="q3")]
        thread.messages(grown, install=False)
        retry = thread.messages(grown, install=False)
        assert [b.message_id for b in retry.bodies] == ["h3"]
        assert retry.requires == [list_digest_of(first)] * 2
        child = thread.messages([*grown, AIMessage(id="a4", content="r4")], parent="c00002")
        assert len(child.bodies) == 5
        assert child.requires == []

    def test_a_write_whose_parent_is_not_the_head_is_cold(self) -> None:
        """A write after another branch (or another worker's checkpoint) is cold."""
        thread = Thread()
        messages = conversation(3)
        thread.messages(messages)
        thread.messages([*messages, HumanMessage(id="h3", content="q3")])
        fork = thread.messages([*messages, HumanMessage(id="h9", content="q9")], parent="c00001")
        assert len(fork.bodies) == 4
        assert [r.base for r in fork.lists] == [None]
        assert thread.store.rebuild(fork.values["messages"])[-1].content == "q9"

    def test_heads_are_per_thread_and_namespace(self) -> None:
        """The head of one thread or namespace is not used for another."""
        encoder = Encoder(SERDE)
        messages = conversation(3)
        first = encoder.encode("a", "", "c1", None, {"messages": messages}, None)
        encoder.installed(first)
        for thread_id, ns in (("b", ""), ("a", "child")):
            write = encoder.encode(thread_id, ns, "c2", "c1", {"messages": messages}, None)
            assert len(write.bodies) == 3
            assert write.requires == []

    def test_requires_names_the_parents_list_and_snapshot(self) -> None:
        """A warm write relies on its parent's list record and that list's snapshot."""
        thread = Thread(delta_limit=30)
        messages = conversation(4)
        first = thread.messages(messages)
        second = thread.messages([*messages, *conversation(2, start=4)])
        third = thread.messages([*messages, *conversation(3, start=4)])
        snapshot, parent = list_digest_of(first), list_digest_of(second)
        assert second.requires == [snapshot, snapshot]
        assert third.requires == [parent, snapshot]
        assert third.cold is not None

    @pytest.mark.parametrize("n", [5, CHUNK_SIZE + 50])
    def test_cold_rows_alone_rebuild_the_list(self, n: int) -> None:
        """``cold()`` of a warm write is a full snapshot (with chunks) and every body."""
        thread = Thread()
        messages = conversation(n)
        thread.messages(messages)
        messages = [*messages[2:], AIMessage(id="new", content="new")]
        messages[1].content = "edited"
        write = thread.messages(messages)
        assert write.cold is not None
        bodies, lists = write.cold()
        assert len(bodies) == len(messages)
        assert len([r for r in lists if r.base is None]) == 1
        alone = Store()
        alone.add(write, (bodies, lists))
        assert alone.rebuild(write.values["messages"]) == messages

    def test_rows_stored_twice_read_the_same(self) -> None:
        """A retried write, or cold rows over the warm ones, changes nothing a read returns."""
        thread = Thread()
        messages = conversation(CHUNK_SIZE + 3)
        thread.messages(messages)
        messages = [*messages, AIMessage(id="x", content="x")]
        write = thread.messages(messages)
        assert write.cold is not None
        bodies = dict(thread.store.bodies)
        thread.store.add(write)
        thread.store.add(write, write.cold())  # the delta record becomes a snapshot
        assert thread.store.bodies == bodies
        assert thread.store.lists[list_digest_of(write)].base is None
        assert thread.store.rebuild(write.values["messages"]) == messages
        assert thread.store.rebuild(thread.writes[0].values["messages"]) == messages[:-1]

    def test_cold_rows_cover_every_message_channel(self) -> None:
        """``cold()`` returns the rows of every list of the checkpoint."""
        thread = Thread()
        values: dict[str, Any] = {"messages": conversation(3), "scratch": conversation(2, start=7)}
        thread.put(values)
        write = thread.put(
            {k: [*v, HumanMessage(id=f"n{k}", content=k)] for k, v in values.items()}
        )
        assert write.cold is not None
        alone = Store()
        alone.add(write, write.cold())
        assert [m.content for m in alone.rebuild(write.values["scratch"])] == [
            "r7",
            "q8",
            "scratch",
        ]
        assert len(alone.rebuild(write.values["messages"])) == 4

    def test_written_and_required_rows_rebuild_the_list(self) -> None:
        """A warm write's rows plus the rows its ``requires`` names (with their snapshots
        and chunks) are enough to read the list."""
        thread = Thread(delta_limit=4)
        messages = conversation(CHUNK_SIZE + 20)
        for i in range(12):
            if i % 3 == 0:
                messages = [*messages[1:], *conversation(6, start=1000 + 10 * i)]
            else:
                messages = [*messages, AIMessage(id=f"x{i}", content=str(i))]
            write = thread.messages(messages)
            assert_self_sufficient(thread.store, write)

    def test_a_snapshot_relies_only_on_required_chunks(self) -> None:
        """A snapshot that reuses a chunk of an older (not the parent's) snapshot writes it."""
        thread = Thread()
        original = conversation(CHUNK_SIZE + 44)
        thread.messages(original)
        edited = [
            HumanMessage(id=m.id, content=f"edited {i}") if i < 30 else m
            for i, m in enumerate(original)
        ]
        second = thread.messages(edited)
        assert snapshots(second)
        reverted = thread.messages(list(original))  # back to the first chunk
        assert snapshots(reverted)
        assert_self_sufficient(thread.store, reverted)


def assert_self_sufficient(store: Store, write: WriteSet) -> None:
    """Check that ``write``'s list rows plus the rows ``requires`` names expand."""
    rows: dict[bytes, ListRow] = {}
    for digest in write.requires:
        row = store.lists[digest]
        rows[digest] = row
        snapshot = store.lists[row.base] if row.base else row
        rows[snapshot.digest] = snapshot
        rows.update({c: store.lists[c] for c in chunk_refs(snapshot)})
    rows.update({r.digest: r for r in write.lists if r.digest not in rows or r.base is None})
    expand_list(list_digest_of(write), rows)


class TestValues:
    """Large non-message values by reference, escaping, and refs owners."""

    def test_large_values_stay_inline_without_full_values(self) -> None:
        """Savers that store only new versions keep every other value inline."""
        write = Thread().put({"summary": "s" * 5000, "plan": [{"x": "y" * 1000}]})
        assert write.values == {"summary": "s" * 5000, "plan": [{"x": "y" * 1000}]}
        assert write.value_rows == []

    def test_large_values_are_stored_by_reference_with_full_values(self) -> None:
        """With ``full_values``, a dict, list or str of 512+ serialized bytes is a value row."""
        thread = Thread(full_values=True)
        values: dict[str, Any] = {
            "summary": "s" * 5000,
            "plan": [{"x": "y" * 1000}],
            "state": {"k": "v" * 1000},
            "small": "tiny",
            "number": 10**100,
            "raw": b"b" * 5000,
            "messages": conversation(2),
        }
        write = thread.put(values)
        refs = {c: read_ref(v) for c, v in write.values.items()}
        assert {c for c, r in refs.items() if r and r[0] == "value"} == {"summary", "plan", "state"}
        assert refs["messages"][0] == "list"  # type: ignore[index]
        for channel in ("small", "number", "raw"):
            assert write.values[channel] is values[channel]
        assert len(write.value_rows) == 3
        assert decode(thread.store, write.values) == values

    def test_value_reference_threshold_is_512_bytes(self) -> None:
        """A value is stored by reference from 512 serialized bytes on."""
        sizes = {len(SERDE.dumps_typed("x" * n)[1]): "x" * n for n in range(480, 530)}
        write = Thread(full_values=True).put({"below": sizes[511], "at": sizes[512]})
        assert write.values["below"] == sizes[511]
        assert read_ref(write.values["at"])[0] == "value"  # type: ignore[index]

    def test_equal_values_are_one_row(self) -> None:
        """The same value in two checkpoints (or channels) has one digest."""
        thread = Thread(full_values=True)
        first = thread.put({"a": "s" * 1000})
        second = thread.put({"a": "s" * 1000, "b": "s" * 1000})
        assert first.values["a"] == second.values["a"] == second.values["b"]
        assert {v.digest for v in first.value_rows} == {v.digest for v in second.value_rows}

    def test_user_dict_with_marker_is_escaped(self) -> None:
        """A user dict carrying our key is stored escaped and decodes back as itself."""
        thread = Thread()
        user = {MARKER_KEY: "messages/1", "list": "00" * 16, "n": 1}
        write = thread.put({"cfg": user, "messages": conversation(1)})
        assert write.values["cfg"] == escape(user)
        assert decode(thread.store, write.values)["cfg"] == user
        assert decode(Store(), {"cfg": write.values["cfg"]})["cfg"] == user

    def test_small_user_dict_with_marker_round_trips_with_full_values(self) -> None:
        """With ``full_values``, a small escaped user dict stays inline and decodes back."""
        thread = Thread(full_values=True)
        user = {MARKER_KEY: "mine", "n": 1}
        write = thread.put({"cfg": user})
        assert write.values["cfg"] == escape(user)
        assert decode(thread.store, write.values)["cfg"] == user

    def test_large_user_dict_with_marker_round_trips_with_full_values(self) -> None:
        """With ``full_values``, a large escaped user dict stored by reference decodes back."""
        thread = Thread(full_values=True)
        user = {MARKER_KEY: "mine", "blob": "x" * 2000}
        write = thread.put({"cfg": user})
        assert read_ref(write.values["cfg"])[0] == "value"  # type: ignore[index]
        assert decode(thread.store, write.values)["cfg"] == user

    def test_checkpoint_owns_its_references(self) -> None:
        """Without ``versions``, one refs record owned by the checkpoint names every list
        and value it references."""
        thread = Thread(full_values=True)
        write = thread.put({"messages": conversation(2), "summary": "s" * 1000, "n": 1})
        ((owner, blob),) = write.refs
        assert owner == "c00001"
        assert decode_refs(blob) == ([list_digest_of(write)], [write.value_rows[0].digest])

    def test_a_checkpoint_without_references_still_has_a_refs_record(self) -> None:
        """A checkpoint with nothing stored by reference records an empty refs entry."""
        write = Thread().put({"goal": "g"})
        assert write.refs == [("c00001", b"")]

    def test_versions_make_each_channel_version_an_owner(self) -> None:
        """With ``versions``, each message channel version owns its list reference."""
        thread = Thread()
        write = thread.put(
            {"messages": conversation(2), "scratch": conversation(1, start=5), "goal": "g"},
            channels=["messages", "scratch", "goal"],
            versions={"messages": "00003.1", "scratch": 7, "goal": 2},
        )
        assert sorted(write.refs) == sorted(
            [
                (version_owner("messages", "00003.1"), encode_refs([list_digest_of(write)], [])),
                (version_owner("scratch", 7), encode_refs([list_digest_of(write, "scratch")], [])),
            ]
        )
        assert version_owner("messages", "00003.1") == "00003.1\x1fmessages"

    def test_an_unchanged_channel_keeps_its_head(self) -> None:
        """With ``versions``, a checkpoint that does not rewrite the message channel passes
        its head on: the next append to it is still a delta."""
        thread = Thread()
        messages = conversation(4)
        first = thread.put({"messages": messages}, channels=["messages"], versions={"messages": 1})
        other = thread.put(
            {"messages": messages, "goal": "g"}, channels=["goal"], versions={"goal": 1}
        )
        assert (other.bodies, other.lists, other.refs) == ([], [], [])
        grown = [*messages, HumanMessage(id="h4", content="q4")]
        write = thread.put({"messages": grown}, channels=["messages"], versions={"messages": 2})
        assert [b.message_id for b in write.bodies] == ["h4"]
        assert [r.base for r in write.lists] == [list_digest_of(first)]
        assert thread.store.rebuild(write.values["messages"]) == grown

    def test_an_unchanged_channel_of_another_parent_is_cold(self) -> None:
        """A head is passed on only from the write's parent checkpoint."""
        thread = Thread()
        messages = conversation(4)
        thread.put({"messages": messages}, channels=["messages"], versions={"messages": 1})
        thread.put({"goal": "g"}, channels=["goal"], versions={"goal": 1}, parent="elsewhere")
        write = thread.put(
            {"messages": [*messages, HumanMessage(id="h4", content="q4")]},
            channels=["messages"],
            versions={"messages": 2},
        )
        assert len(write.bodies) == 5
        assert write.requires == []


class TestDecode:
    """Reading references back, and what a read teaches the encoder."""

    def test_decode_restores_every_channel(self) -> None:
        """Lists, escaped dicts and plain values come back as written."""
        thread = Thread()
        values: dict[str, Any] = {
            "messages": conversation(7),
            "cfg": {MARKER_KEY: "mine"},
            "goal": "g",
        }
        write = thread.put(values)
        assert decode(thread.store, write.values) == values
        assert decode(thread.store, write.values, thread.encoder) == values

    def test_missing_body_raises_format_error(self) -> None:
        """A list whose bodies are not all stored is reported as a format error."""
        thread = Thread()
        write = thread.messages(conversation(3))
        thread.store.bodies.pop(write.bodies[1].digest)
        with pytest.raises(FormatError, match="missing message body"):
            decode(thread.store, write.values)

    def test_missing_value_raises_format_error(self) -> None:
        """A value reference whose row is gone is reported as a format error."""
        thread = Thread(full_values=True)
        write = thread.put({"summary": "s" * 1000})
        thread.store.values.clear()
        with pytest.raises(FormatError, match="missing value row"):
            decode(thread.store, write.values)

    def test_a_body_that_is_not_a_message_raises_format_error(self) -> None:
        """A body row that does not decode to a message is reported as a format error."""
        thread = Thread()
        write = thread.messages(conversation(1))
        digest = write.bodies[0].digest
        type_, data = SERDE.dumps_typed("not a message")
        thread.store.bodies[digest] = BodyRow(digest, None, type_, data)
        with pytest.raises(FormatError, match="not a message"):
            decode(thread.store, write.values)

    def test_decoded_messages_are_copies(self) -> None:
        """Mutating a decoded message (deeply) does not change what the next read returns."""
        thread = Thread()
        write = thread.messages(conversation(3))
        for encoder in (thread.encoder, Encoder(SERDE)):
            first = decode(thread.store, write.values, encoder)["messages"]
            first[0].content = "mutated"
            first[1].additional_kwargs["k"] = 1
            first.append(HumanMessage("extra"))
            second = decode(thread.store, write.values, encoder)["messages"]
            assert second == conversation(3)
            assert all(a is not b for a, b in zip(first, second, strict=False))

    def test_written_messages_are_not_handed_out(self) -> None:
        """A read through the writing encoder returns copies, not the objects written."""
        thread = Thread()
        messages = conversation(2)
        write = thread.messages(messages)
        read = decode(thread.store, write.values, thread.encoder)["messages"]
        assert read == messages
        assert all(a is not b for a, b in zip(read, messages, strict=True))
        messages[0].content = "changed after the write"
        assert decode(thread.store, write.values, thread.encoder)["messages"][0].content == "q0"

    def test_a_read_teaches_the_head(self) -> None:
        """After a remembered read, an append to that checkpoint writes a delta only."""
        writer = Thread()
        messages = conversation(6)
        writer.messages(messages)
        reader = Thread()
        reader.store = writer.store
        decode(reader.store, writer.writes[0].values, reader.encoder, "c00001", remember=True)
        reader.head = "c00001"
        write = reader.messages([*messages, HumanMessage(id="h6", content="q6")])
        assert [b.message_id for b in write.bodies] == ["h6"]
        assert [r.base for r in write.lists] == [list_digest_of(writer.writes[0])]
        assert reader.store.rebuild(write.values["messages"])[-1].content == "q6"

    def test_a_read_teaches_which_chunks_are_stored(self) -> None:
        """After a remembered read, the next snapshot does not write old chunks again."""
        writer = Thread()
        writer.messages(conversation(CHUNK_SIZE + 5))
        reader = Thread(delta_limit=2)
        reader.store = writer.store
        decode(reader.store, writer.writes[0].values, reader.encoder, "c00001", remember=True)
        reader.head = "c00001"
        write = reader.messages(conversation(CHUNK_SIZE + 9))
        assert snapshots(write)
        assert not chunks(write)
        assert len(write.bodies) == 4
        assert reader.store.rebuild(write.values["messages"]) == conversation(CHUNK_SIZE + 9)

    def test_a_read_that_is_not_remembered_teaches_nothing(self) -> None:
        """``remember=False`` (list, history) leaves the encoder cold for that checkpoint."""
        writer = Thread()
        messages = conversation(4)
        writer.messages(messages)
        reader = Thread()
        decode(writer.store, writer.writes[0].values, reader.encoder, "c00001")
        reader.head = "c00001"
        write = reader.messages([*messages, HumanMessage(id="h4", content="q4")])
        assert len(write.bodies) == 5
        assert write.requires == []


class TestMessageCache:
    """Digest -> pristine message, found by id and confirmed by value."""

    def test_find_confirms_by_value(self) -> None:
        """A message is found only while every field equals the cached one."""
        cache = MessageCache()
        message = AIMessage(id="a", content="x", additional_kwargs={"k": [1]})
        cache.add(b"d" * 16, message.model_copy(deep=True))
        assert cache.find(message) == b"d" * 16
        assert cache.find(AIMessage(id="a", content="x", additional_kwargs={"k": [1]})) == b"d" * 16
        message.additional_kwargs["k"].append(2)
        assert cache.find(message) is None
        assert cache.find(HumanMessage(id="a", content="x", additional_kwargs={"k": [1]})) is None
        assert cache.find(AIMessage(content="x")) is None

    def test_get_hands_out_copies(self) -> None:
        """``get`` returns a fresh copy each time, sharing no container with the cache."""
        cache = MessageCache()
        cache.add(b"d" * 16, HumanMessage(id="h", content=[{"type": "text", "text": "t"}]))
        first = cache.get(b"d" * 16)
        assert first is not None
        first.content[0]["text"] = "changed"  # type: ignore[index]
        second = cache.get(b"d" * 16)
        assert second is not None
        assert second.content == [{"type": "text", "text": "t"}]
        assert second is not cache.pristine(b"d" * 16)
        assert cache.get(b"z" * 16) is None

    def test_cache_is_bounded(self) -> None:
        """Beyond ``max_entries`` the least recently used entries are evicted."""
        cache = MessageCache(max_entries=3)
        for i in range(5):
            cache.add(bytes([i]) * 16, HumanMessage(id=f"m{i}", content=str(i)))
        assert [cache.pristine(bytes([i]) * 16) is not None for i in range(5)] == [
            False,
            False,
            True,
            True,
            True,
        ]
        assert cache.find(HumanMessage(id="m0", content="0")) is None
        assert cache.find(HumanMessage(id="m4", content="4")) == bytes([4]) * 16

    def test_missing_bodies_are_the_uncached_ones(self) -> None:
        """A read fetches only the bodies the cache does not hold."""
        thread = Thread()
        write = thread.messages(conversation(3))
        digests = [b.digest for b in write.bodies]
        assert thread.encoder.missing_bodies([*digests, digests[0]]) == []
        assert Encoder(SERDE).missing_bodies([*digests, digests[0]]) == digests


class TestHeads:
    """(thread, namespace, channel) -> the list of the last checkpoint seen."""

    def head(self, checkpoint_id: str) -> Head:
        """An empty head of ``checkpoint_id``."""
        return Head(checkpoint_id, b"l" * 16, [], b"l" * 16, [], [])

    def test_head_is_used_only_for_its_checkpoint(self) -> None:
        """``get`` returns the head only when asked for that checkpoint as parent."""
        heads = Heads()
        heads.set(("t", "", "messages"), self.head("c1"))
        assert heads.get(("t", "", "messages"), "c1") is not None
        assert heads.get(("t", "", "messages"), "c2") is None
        assert heads.get(("t", "", "messages"), None) is None
        assert heads.get(("t", "", "other"), "c1") is None

    def test_forget_drops_only_the_named_threads(self) -> None:
        """Deleting a thread forgets its heads (every namespace and channel), not others."""
        heads = Heads()
        for key in (("t", "", "m"), ("t", "ns", "m"), ("u", "", "m")):
            heads.set(key, self.head("c1"))
        heads.forget(["t"])
        assert heads.get(("t", "", "m"), "c1") is None
        assert heads.get(("t", "ns", "m"), "c1") is None
        assert heads.get(("u", "", "m"), "c1") is not None

    def test_heads_are_bounded(self) -> None:
        """Beyond ``max_entries`` the least recently used heads are evicted."""
        heads = Heads(max_entries=2)
        heads.set(("a", "", "m"), self.head("c1"))
        heads.set(("b", "", "m"), self.head("c1"))
        assert heads.get(("a", "", "m"), "c1") is not None  # now the most recent
        heads.set(("c", "", "m"), self.head("c1"))
        assert heads.get(("b", "", "m"), "c1") is None
        assert heads.get(("a", "", "m"), "c1") is not None
