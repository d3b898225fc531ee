"""The thread document of ``_document``: built, checked and decoded without a database."""

from __future__ import annotations

import copy
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm.checkpoint._document import (
    SCHEMA,
    VERSION,
    ThreadDocument,
    build_document,
    decode_values,
    encode_values,
    import_checkpoint,
    import_metadata,
    is_json_data,
    validate_document,
)

EXPORTED_AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

MESSAGES = [
    SystemMessage("You are a billing agent.", id="s"),
    HumanMessage("hi", id="h1", name="ada", additional_kwargs={"channel": "web"}),
    AIMessage(
        "",
        id="a1",
        tool_calls=[{"name": "lookup", "args": {"q": [1, 2]}, "id": "c1"}],
        usage_metadata={"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
        response_metadata={"model_name": "m"},
    ),
    ToolMessage("ok", tool_call_id="c1", id="t1", artifact={"rows": 3}, status="error"),
    AIMessageChunk(content="partial", id="a2"),
]

STRUCTURED: dict[str, Any] = {
    "goal": "ship v2",
    "plan": [{"id": "s1", "task": "export", "status": "done"}],
    "constraints": [
        {"id": "c1", "text": "no email", "source_message_id": "h1", "status": "confirmed"}
    ],
    "artifacts": [
        {
            "id": "art",
            "kind": "report",
            "summary": "rows",
            "uri": "mem://x",
            "source_message_id": "t1",
            "tokens": 9,
        }
    ],
    "last_error": {"message": "boom", "recovery": "retry", "step_id": "s1", "at": None},
    "summary": {
        "text": "so far",
        "version": 2,
        "coverage": {"first_message_id": "h0", "last_message_id": "a0", "message_count": 4},
        "goal": "ship v2",
        "constraints": ["no email"],
        "completed_steps": [],
        "open_questions": [],
        "errors": [],
    },
}


def tup(
    thread_id: str,
    values: dict[str, Any],
    *,
    ns: str = "",
    parent: str | None = None,
    metadata: dict[str, Any] | None = None,
    versions: dict[str, Any] | None = None,
) -> CheckpointTuple:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = versions if versions is not None else dict.fromkeys(values, 1)
    cfg: RunnableConfig = {
        "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cp["id"]}
    }
    parent_config: RunnableConfig | None = None
    if parent is not None:
        parent_config = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}
        }
    meta: Any = metadata if metadata is not None else {"source": "loop", "step": 3, "parents": {}}
    return CheckpointTuple(cfg, cp, meta, parent_config)


def document(values: dict[str, Any] | None = None, **kw: Any) -> ThreadDocument:
    latest = tup("t1", {"messages": list(MESSAGES), **STRUCTURED} if values is None else values)
    return build_document("t1", latest, [latest], exported_at=EXPORTED_AT, **kw)


def dump(messages: list[Any]) -> list[Any]:
    return [(type(m), m.model_dump()) for m in messages]


class Color(Enum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


class TestJSONData:
    """is_json_data: what json.dumps writes and json.loads reads back equal."""

    @pytest.mark.parametrize(
        "value",
        [None, True, 0, -3, 1.5, "", "x\x00y", [], {}, {"a": [1, {"b": None}]}, Level.HIGH],
    )
    def test_json(self, value: Any) -> None:
        assert is_json_data(value)
        assert json.loads(json.dumps(value)) == value

    @pytest.mark.parametrize(
        "value",
        [
            (1, 2),
            {1: "a"},
            {"a": {2, 3}},
            float("nan"),
            float("inf"),
            b"bytes",
            date(2026, 1, 1),
            Decimal("1.5"),
            Color.RED,
            HumanMessage("hi"),
            [object()],
        ],
    )
    def test_not_json(self, value: Any) -> None:
        assert not is_json_data(value)

    def test_too_deep_is_not_json(self) -> None:
        deep: list[Any] = []
        for _ in range(5000):
            deep = [deep]
        assert not is_json_data(deep)

    @given(
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(),
            lambda inner: (
                st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)
            ),
            max_leaves=20,
        )
    )
    def test_any_json_value_survives_export_and_import(self, value: Any) -> None:
        doc = document({"mine": value})
        assert doc["values"] == {"mine": value}
        reread = validate_document(json.loads(json.dumps(doc, allow_nan=False)))
        assert decode_values(reread) == {"mine": value}


class TestEncodeValues:
    """Which channels go into values, message_channels and skipped."""

    def test_messages_and_structured_fields(self) -> None:
        values, message_channels, skipped = encode_values({"messages": MESSAGES, **STRUCTURED})
        assert message_channels == ["messages"]
        assert skipped == []
        assert values["messages"] == messages_to_dict(MESSAGES)
        for field, value in STRUCTURED.items():
            assert values[field] == value

    def test_every_message_list_is_a_message_channel(self) -> None:
        values, message_channels, _ = encode_values(
            {"messages": MESSAGES[:2], "llm_input_messages": MESSAGES[2:], "empty": []}
        )
        assert message_channels == ["llm_input_messages", "messages"]
        assert values["empty"] == []

    def test_langgraph_trigger_channels_are_left_out(self) -> None:
        values, _, skipped = encode_values(
            {"__start__": {"x": 1}, "branch:to:agent": None, "goal": "g"},
            ["__start__", "branch:to:agent", "goal", "branch:to:tools"],
        )
        assert values == {"goal": "g"}
        assert skipped == []

    def test_values_that_are_not_json(self) -> None:
        _, _, skipped = encode_values(
            {"when": datetime(2026, 1, 1), "nested": {"a": [1, {2}]}, "pair": (1, 2)}
        )
        assert skipped == [
            {
                "channel": "nested",
                "type": "dict",
                "reason": "holds a set, which is not JSON data",
            },
            {"channel": "pair", "type": "tuple", "reason": "holds a tuple, which is not JSON data"},
            {
                "channel": "when",
                "type": "datetime.datetime",
                "reason": "holds a datetime.datetime, which is not JSON data",
            },
        ]

    def test_versioned_channel_without_value_is_reported(self) -> None:
        values, _, skipped = encode_values({"goal": "g"}, ["goal", "messages"])
        assert values == {"goal": "g"}
        assert [(s["channel"], s["type"]) for s in skipped] == [("messages", "none")]
        assert "DeltaChannel" in skipped[0]["reason"]

    def test_a_message_entry_that_is_not_json_is_left_out_of_that_message_only(self) -> None:
        odd = AIMessage("x", id="a", additional_kwargs={"when": datetime(2026, 1, 1), "k": 1})
        doc = document({"messages": [*MESSAGES, odd]})
        assert doc["message_channels"] == ["messages"]
        assert doc["skipped"] == [
            {
                "channel": "messages",
                "index": 5,
                "message_id": "a",
                "field": "additional_kwargs['when']",
                "type": "datetime.datetime",
                "reason": "a datetime.datetime is not JSON data: the entry is left out",
            }
        ]
        decoded = decode_values(validate_document(json.loads(json.dumps(doc))))
        assert dump(decoded["messages"][:5]) == dump(MESSAGES)
        expected = AIMessage("x", id="a", additional_kwargs={"k": 1})
        assert dump(decoded["messages"][5:]) == dump([expected])

    def test_a_tuple_artifact_keeps_the_conversation(self) -> None:
        """One field JSON cannot hold: that field is left out, the channel is kept."""
        odd = ToolMessage("x", tool_call_id="c1", id="t9", artifact=("x", 1))
        doc = document({"messages": [*MESSAGES[:3], odd, *MESSAGES[3:]], "goal": "g"})
        assert doc["message_channels"] == ["messages"]
        assert doc["skipped"] == [
            {
                "channel": "messages",
                "index": 3,
                "message_id": "t9",
                "field": "artifact",
                "type": "tuple",
                "reason": "a tuple is not JSON data: the field is left out and reads back as None",
            }
        ]
        assert "artifact" not in doc["values"]["messages"][3]["data"]
        reread = validate_document(json.loads(json.dumps(doc, allow_nan=False)))
        assert reread == doc
        assert reread["skipped"] == doc["skipped"]
        assert list(reread["skipped"][0]) == list(doc["skipped"][0])
        messages = decode_values(reread)["messages"]
        assert dump(messages[:3] + messages[4:]) == dump(MESSAGES)
        expected = ToolMessage("x", tool_call_id="c1", id="t9", artifact=None)
        assert dump([messages[3]]) == dump([expected])

    def test_what_json_cannot_hold_is_left_out_where_it_is(self) -> None:
        odd = HumanMessage(
            "x",
            additional_kwargs={"tags": ["a", {"b"}, "c"], 7: "seven", "ok": {"n": (1,)}},
        )
        values, _, skipped = encode_values({"messages": [odd]})
        assert [(s["message_id"], s["field"], s["type"]) for s in skipped] == [
            (None, "additional_kwargs['tags'][1]", "set"),
            (None, "additional_kwargs[7]", "int"),
            (None, "additional_kwargs['ok']['n']", "tuple"),
        ]
        assert skipped[0]["reason"] == "a set is not JSON data: the item is left out of the array"
        assert skipped[1]["reason"] == "a key of type int is not a string: the entry is left out"
        assert values["messages"][0]["data"]["additional_kwargs"] == {
            "tags": ["a", "c"],
            "ok": {},
        }

    def test_a_list_shaped_like_messages_is_not_taken_for_messages(self) -> None:
        """A channel of one's own whose items look like messages_to_dict's is skipped
        (import would refuse it outside message_channels)."""
        events = [{"type": "click", "data": {"x": 1}}]
        values, message_channels, skipped = encode_values({"events": events, "goal": "g"})
        assert values == {"goal": "g"}
        assert message_channels == []
        assert skipped == [
            {
                "channel": "events",
                "type": "list",
                "reason": "holds items shaped like messages_to_dict's ({'type': str, 'data': "
                "{...}}) but no messages: import would take them for messages",
            }
        ]
        validate_document(json.loads(json.dumps(document({"events": events}))))

    def test_messages_that_do_not_read_back_the_same(self) -> None:
        class Note(HumanMessage):
            """A user's own message class: messages_from_dict gives a HumanMessage."""

        _, message_channels, skipped = encode_values({"messages": [Note(content="x", id="n")]})
        assert message_channels == []
        assert skipped[0]["reason"] == (
            "holds messages that do not read back the same from messages_to_dict"
        )

    def test_values_are_copies(self) -> None:
        plan = [{"id": "s1", "task": "t", "status": "done"}]
        values, _, _ = encode_values({"plan": plan, "level": Level.HIGH})
        values["plan"][0]["status"] = "blocked"
        assert plan[0]["status"] == "done"
        assert type(values["level"]) is int


class TestBuildDocument:
    """The whole document."""

    def test_keys_schema_and_version(self) -> None:
        doc = document()
        assert list(doc) == [
            "schema",
            "version",
            "thread_id",
            "exported_at",
            "checkpoint",
            "checkpoints",
            "values",
            "message_channels",
            "skipped",
            "ttl",
            "expires_at",
        ]
        assert (doc["schema"], doc["version"]) == (SCHEMA, VERSION) == ("langgraph-stm.thread", 1)
        assert doc["exported_at"] == "2026-03-04T05:06:07+00:00"
        assert json.loads(json.dumps(doc, allow_nan=False)) == doc

    def test_checkpoints_of_every_namespace_in_order(self) -> None:
        root1 = tup("t1", {})
        root2 = tup("t1", {}, parent=root1.checkpoint["id"])
        child = tup("t1", {}, ns="child:abc")
        latest = tup("t1", {"goal": "g"}, parent=root2.checkpoint["id"])
        doc = build_document("t1", latest, [latest, child, root2, root1], exported_at=EXPORTED_AT)
        assert [(c["ns"], c["id"]) for c in doc["checkpoints"]] == [
            ("", root1.checkpoint["id"]),
            ("", root2.checkpoint["id"]),
            ("", latest.checkpoint["id"]),
            ("child:abc", child.checkpoint["id"]),
        ]
        assert doc["checkpoints"][0]["parent_id"] is None
        assert doc["checkpoints"][1]["parent_id"] == root1.checkpoint["id"]
        assert doc["checkpoints"][0]["ts"] == root1.checkpoint["ts"]
        assert doc["checkpoint"]["id"] == latest.checkpoint["id"]
        assert doc["checkpoint"]["ts"] == latest.checkpoint["ts"]

    def test_metadata_keeps_its_json_entries_only(self) -> None:
        meta = {
            "source": "loop",
            "step": 4,
            "parents": {"": "p"},
            "run_id": "r1",
            "when": datetime(2026, 1, 1),
            "tags": ("a",),
        }
        latest = tup("t1", {}, metadata=meta)
        doc = build_document("t1", latest, [latest], exported_at=EXPORTED_AT)
        assert doc["checkpoint"]["metadata"] == {
            "source": "loop",
            "step": 4,
            "parents": {"": "p"},
            "run_id": "r1",
        }

    def test_ttl_and_expiry(self) -> None:
        expires = datetime(2026, 3, 5, tzinfo=UTC)
        doc = document(ttl=3600.0, expires_at=expires)
        assert (doc["ttl"], doc["expires_at"]) == (3600.0, "2026-03-05T00:00:00+00:00")
        assert document()["ttl"] is None
        naive = document(expires_at=datetime(2026, 3, 5) + timedelta(hours=1))
        assert naive["expires_at"] == "2026-03-05T01:00:00+00:00"


class TestValidateDocument:
    """Schema, version and shape, each refused with a message that names it."""

    def test_a_built_document_is_valid_and_copied(self) -> None:
        doc = document(ttl=60, expires_at=EXPORTED_AT)
        checked = validate_document(json.loads(json.dumps(doc)))
        assert checked == doc
        checked["values"]["plan"].clear()
        assert doc["values"]["plan"]

    def test_unknown_keys_are_ignored(self) -> None:
        doc: dict[str, Any] = {**document(), "note": "for the auditor"}
        assert "note" not in validate_document(doc)

    @pytest.mark.parametrize(
        ("edit", "match"),
        [
            (lambda d: d.update(schema="langgraph.thread"), r"document\['schema'\] must be"),
            (lambda d: d.pop("schema"), r"document\['schema'\] must be"),
            (lambda d: d.update(version="1"), r"document\['version'\] must be an integer"),
            (lambda d: d.update(version=True), r"document\['version'\] must be an integer"),
            (lambda d: d.update(version=0), "version 0 is not supported"),
            (lambda d: d.pop("checkpoints"), "lacks 'checkpoints'"),
            (lambda d: d.update(thread_id=""), r"document\['thread_id'\] must not be empty"),
            (lambda d: d.update(thread_id=7), r"document\['thread_id'\] must be a string"),
            (lambda d: d.update(exported_at="yesterday"), "not an ISO 8601 time"),
            (lambda d: d.update(checkpoint=[]), r"document\['checkpoint'\] must be an object"),
            (lambda d: d["checkpoint"].pop("id"), r"\['checkpoint'\]\['id'\] must be a string"),
            (lambda d: d.update(checkpoints={}), r"\['checkpoints'\] must be an array"),
            (lambda d: d["checkpoints"][0].update(ns=None), r"\['checkpoints'\]\[0\]\['ns'\]"),
            (lambda d: d.update(values=[]), r"document\['values'\] must be an object"),
            (lambda d: d["values"].update(x=float("nan")), r"\['values'\]\['x'\] holds a float"),
            (lambda d: d["values"].update(x=(1,)), r"\['values'\]\['x'\] holds a tuple"),
            (lambda d: d["values"].update({"__start__": 1}), "LangGraph owns"),
            (lambda d: d.update(message_channels=["goal"]), r"\['values'\]\['goal'\] must be an"),
            (lambda d: d.update(message_channels=["missing"]), "names no channel"),
            (
                lambda d: d.update(message_channels=[]),
                r"document\['values'\]\['messages'\] holds messages_to_dict items .* not in "
                r"document\['message_channels'\]",
            ),
            (
                lambda d: d["values"].update(mine=[1, {"type": "human", "data": {}}]),
                r"document\['values'\]\['mine'\] holds messages_to_dict items",
            ),
            (
                lambda d: d.update(message_channels=["messages", "messages"]),
                r"document\['message_channels'\]\[1\] repeats 'messages'",
            ),
            (lambda d: d["values"]["messages"].append([1]), r"\['messages'\]\[5\] must be an obj"),
            (lambda d: d["values"]["messages"].append({"type": "ai"}), "messages_to_dict item"),
            (lambda d: d["skipped"].append({"channel": 1}), r"\['skipped'\]\[0\]\['channel'\]"),
            (
                lambda d: d["skipped"].append({"channel": "m", "index": "0", "type": "t"}),
                r"\['skipped'\]\[0\]\['index'\] must be an integer",
            ),
            (
                lambda d: d["skipped"].append({"channel": "m", "field": None, "type": "t"}),
                r"\['skipped'\]\[0\]\['field'\] must be a string",
            ),
            (lambda d: d.update(ttl=-1), r"document\['ttl'\] must be null or seconds"),
            (lambda d: d.update(ttl="1h"), r"document\['ttl'\] must be null or seconds"),
            (lambda d: d.update(expires_at="soon"), "not an ISO 8601 time"),
        ],
    )
    def test_bad_documents(self, edit: Any, match: str) -> None:
        doc: Any = copy.deepcopy(document())
        edit(doc)
        with pytest.raises(InvalidArgumentError, match=match) as info:
            validate_document(doc)
        assert str(info.value).startswith("import_thread: invalid thread document: ")

    @pytest.mark.parametrize("value", [None, [], "{}", 3])
    def test_not_a_document(self, value: Any) -> None:
        with pytest.raises(InvalidArgumentError, match="the document must be an object"):
            validate_document(value)


class TestDecodeAndImport:
    """Values back to Python, the checkpoint and metadata an import writes."""

    def test_messages_come_back_with_class_and_fields(self) -> None:
        doc = validate_document(json.loads(json.dumps(document())))
        values = decode_values(doc)
        assert dump(values["messages"]) == dump(MESSAGES)
        assert {k: v for k, v in values.items() if k != "messages"} == STRUCTURED

    def test_unknown_message_type(self) -> None:
        doc = validate_document(document())
        doc["values"]["messages"].append({"type": "martian", "data": {}})
        with pytest.raises(InvalidArgumentError, match="martian"):
            decode_values(doc)

    def test_bad_message_fields(self) -> None:
        doc = validate_document(document())
        doc["values"]["messages"].append({"type": "tool", "data": {"content": "x"}})
        with pytest.raises(
            InvalidArgumentError,
            match=r"document\['values'\]\['messages'\]\[5\] is not a message LangChain reads",
        ):
            decode_values(doc)

    @pytest.mark.parametrize("tool_calls", ["oops", ["oops"], [1], {"a": 1}])
    def test_any_failure_of_langchain_names_the_message(self, tool_calls: Any) -> None:
        """Whatever LangChain raises (here AttributeError), an InvalidArgumentError
        naming the message's path in the document."""
        doc = validate_document(json.loads(json.dumps(document())))
        assert doc["values"]["messages"][2]["type"] == "ai"
        doc["values"]["messages"][2]["data"]["tool_calls"] = tool_calls
        with pytest.raises(
            InvalidArgumentError,
            match=r"^import_thread: invalid thread document: document\['values'\]"
            r"\['messages'\]\[2\] is not a message LangChain reads",
        ) as info:
            decode_values(doc)
        assert info.value.__cause__ is not None

    def test_import_checkpoint(self) -> None:
        versions = iter(range(1, 10))
        checkpoint, new_versions = import_checkpoint(
            {"goal": "g", "plan": []}, lambda current, _: next(versions)
        )
        assert checkpoint["channel_values"] == {"goal": "g", "plan": []}
        assert checkpoint["channel_versions"] == new_versions == {"goal": 1, "plan": 2}
        assert checkpoint["versions_seen"] == {}
        assert datetime.fromisoformat(checkpoint["ts"]).tzinfo is not None

    def test_import_metadata(self) -> None:
        doc = document()
        meta: Any = import_metadata(doc)
        assert meta == {
            "source": "update",
            "step": -1,
            "parents": {},
            "stm_imported_from": {
                "thread_id": "t1",
                "checkpoint_id": doc["checkpoint"]["id"],
                "checkpoint_ts": doc["checkpoint"]["ts"],
                "exported_at": "2026-03-04T05:06:07+00:00",
                "schema": "langgraph-stm.thread",
                "version": 1,
            },
        }
        assert is_json_data(meta)
