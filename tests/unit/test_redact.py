"""Redactor: every built-in detector (positives and near misses), Luhn, nested values,
messages (copied, never mutated), custom rules and markers, and the saver mixin on an
InMemorySaver.

Fake secrets are assembled from parts at run time, so this file holds no literal that
a secret scanner would flag.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Interrupt, Send

from langgraph_stm import STMSaver
from langgraph_stm.errors import InvalidArgumentError
from langgraph_stm.redaction import (
    API_KEY,
    CARD_NUMBER,
    DEFAULT_DETECTORS,
    METADATA_KEY,
    Detector,
    Redactor,
    luhn_valid,
)

ALNUM = "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zC"


def fake(prefix: str, length: int, alphabet: str = ALNUM) -> str:
    """``prefix`` and ``length`` characters cycling through ``alphabet``."""
    return prefix + (alphabet * (length // len(alphabet) + 1))[:length]


OPENAI = fake("sk-", 48)
OPENAI_PROJ = fake("sk-" + "proj-", 64)
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = fake("ghp" + "_", 36)
GITHUB_OAUTH = fake("gho" + "_", 36)
GITHUB_PAT = fake("github" + "_pat_", 60, ALNUM + "_")
SLACK = "xox" + "b-" + "123456789012-1234567890123-" + fake("", 24)
JWT_TOKEN = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA " + "PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MzM4ZxOOYqZQ\n"
    "-----END RSA " + "PRIVATE KEY-----"
)
VISA = "4111 1111 1111 1111"
MASTERCARD = "5500-0000-0000-0004"
AMEX = "3782 822463 10005"


@pytest.fixture
def r() -> Redactor:
    return Redactor()


# -- detectors -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "secret", [OPENAI, OPENAI_PROJ, AWS, GITHUB, GITHUB_OAUTH, GITHUB_PAT, SLACK]
)
def test_api_keys(r: Redactor, secret: str) -> None:
    text, count = r.redact_text(f"use {secret} now")
    assert text == "use [REDACTED:api_key] now"
    assert count == 1


@pytest.mark.parametrize(
    "text",
    [
        "pip install sk-learn",
        "task-" + fake("", 30),  # "sk-" inside a word
        "AKIA" + "1234",  # too short
        "AKIA" + "IOSFODNN7EXAMPLEX1",  # too long: not an access key id
        "ghp" + "_short",
        "xox" + "b-short",
        "the slack channel xox",
    ],
)
def test_api_key_near_misses(r: Redactor, text: str) -> None:
    assert r.redact_text(text) == (text, 0)


def test_jwt(r: Redactor) -> None:
    assert r.redact(f"token={JWT_TOKEN}") == "token=[REDACTED:jwt]"
    assert r.redact(f"id {JWT_TOKEN}.") == "id [REDACTED:jwt]."


@pytest.mark.parametrize("text", ["a.b.c", "eyJ.eyJ.x", "version 1.2.3", "eyJhbGci only"])
def test_jwt_near_misses(r: Redactor, text: str) -> None:
    assert r.redact_text(text) == (text, 0)


def test_bearer(r: Redactor) -> None:
    assert r.redact("Authorization: Bearer abc123DEF456ghi") == (
        "Authorization: Bearer [REDACTED:bearer_token]"
    )
    assert r.redact("authorization: bearer abc123DEF456ghi") == (
        "authorization: bearer [REDACTED:bearer_token]"
    )
    # A JWT bearer token is a JWT, detected once.
    assert r.redact_text(f"Bearer {JWT_TOKEN}") == ("Bearer [REDACTED:jwt]", 1)


@pytest.mark.parametrize("text", ["the bearer of bad news", "Bearer short", "bearer: yes"])
def test_bearer_near_misses(r: Redactor, text: str) -> None:
    assert r.redact_text(text) == (text, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2", "password=[REDACTED:password]"),
        ("passwd: s3cr3t!x", "passwd: [REDACTED:password]"),
        ("secret=abc&user=bob", "secret=[REDACTED:password]&user=bob"),
        ("DB_PASSWORD = 'two words'", "DB_PASSWORD = '[REDACTED:password]'"),
        (
            '{"client_secret": "x y z", "id": 1}',
            '{"client_secret": "[REDACTED:password]", "id": 1}',
        ),
        ("pwd=abc; next", "pwd=[REDACTED:password]; next"),
    ],
)
def test_password_pairs(r: Redactor, text: str, expected: str) -> None:
    assert r.redact_text(text) == (expected, 1)


@pytest.mark.parametrize(
    "text",
    [
        "I forgot my password",
        "password reset link sent",
        "passwords: 3 rotated",
        "the secret is out",
        "password=",
    ],
)
def test_password_near_misses(r: Redactor, text: str) -> None:
    assert r.redact_text(text) == (text, 0)


def test_private_key(r: Redactor) -> None:
    assert r.redact(f"key:\n{PEM}\nend") == "key:\n[REDACTED:private_key]\nend"
    escaped = PEM.replace("\n", "\\n")  # inside a JSON string
    assert r.redact(f'{{"k": "{escaped}"}}') == '{"k": "[REDACTED:private_key]"}'
    public = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----"
    assert r.redact_text(public) == (public, 0)


@pytest.mark.parametrize("card", [VISA, MASTERCARD, AMEX, "4111111111111111", "4222222222222"])
def test_card_numbers(r: Redactor, card: str) -> None:
    assert r.redact_text(f"card {card}, thanks") == ("card [REDACTED:card_number], thanks", 1)


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112",  # fails Luhn
        "order id 1234-5678-9012-3456",  # fails Luhn
        "call 4111 1111",  # too short
        "uuid 12345678-1234-1234-1234-123456789012",
        "ts 1733059200000123456789",  # longer than 19 digits
    ],
)
def test_card_near_misses(r: Redactor, text: str) -> None:
    assert r.redact_text(text) == (text, 0)


def test_luhn() -> None:
    assert luhn_valid("79927398713")
    assert not luhn_valid("79927398710")
    assert luhn_valid("0")


def test_every_kind_in_one_text(r: Redactor) -> None:
    text = f"{OPENAI} {JWT_TOKEN} Bearer abcdefgh1234 password=pw1 {PEM} {VISA}"
    redacted, count = r.redact_text(text)
    assert count == 6
    kinds = re.findall(r"\[REDACTED:(\w+)\]", redacted)
    assert kinds == ["api_key", "jwt", "bearer_token", "password", "private_key", "card_number"]


def test_deterministic_and_idempotent(r: Redactor) -> None:
    text = f"password={OPENAI} and {VISA}"
    once, count = r.redact_text(text)
    assert (once, count) == r.redact_text(text)
    assert r.redact_text(once) == (once, 0)
    assert r.count_markers(once) == count


# -- values --------------------------------------------------------------------------------
def test_nested_values_copied(r: Redactor) -> None:
    value: dict[str, Any] = {
        "goal": f"deploy with {AWS}",
        "plan": [{"id": "s1", "task": f"call api with {OPENAI}", "status": "pending"}],
        "n": 3,
        "deep": {"list": [("Bearer abcdefgh1234", 1)], "password": "hunter2"},
    }
    before = copy.deepcopy(value)
    redacted, count = r.redact_value(value)
    assert value == before
    assert count == 4
    assert redacted["goal"] == "deploy with [REDACTED:api_key]"
    assert redacted["plan"][0]["task"] == "call api with [REDACTED:api_key]"
    assert redacted["deep"]["list"][0] == ("Bearer [REDACTED:bearer_token]", 1)
    assert redacted["deep"]["password"] == "[REDACTED:password]"
    assert redacted["n"] == 3


def test_unchanged_values_are_the_same_objects(r: Redactor) -> None:
    value = {"a": ["plain", {"b": 1}]}
    assert r.redact(value) is value
    message = HumanMessage("hello", id="m1")
    assert r.redact(message) is message


def test_messages(r: Redactor) -> None:
    ai = AIMessage(
        content=[
            {"type": "text", "text": f"here: {OPENAI}"},
            {"type": "image_url", "image_url": {"url": "x"}},
        ],
        id="ai-1",
        tool_calls=[
            {
                "name": "login",
                "args": {"user": "bob", "cfg": {"token": f"Bearer {JWT_TOKEN}"}},
                "id": "c1",
            }
        ],
        additional_kwargs={
            "function_call": {"name": "login", "arguments": f'{{"key": "{GITHUB}"}}'}
        },
    )
    tool = ToolMessage(
        f"ok {SLACK}", tool_call_id="c1", id="t-1", artifact={"raw": f"password=pw {VISA}"}
    )
    live = [ai.model_copy(deep=True), tool.model_copy(deep=True)]
    [red_ai, red_tool], count = r.redact_value([ai, tool])
    assert count == 6
    assert [ai, tool] == live  # the live objects are unchanged
    assert red_ai.id == "ai-1"
    assert red_tool.id == "t-1"
    assert red_ai.content[0]["text"] == "here: [REDACTED:api_key]"
    assert red_ai.content[1] == ai.content[1]
    assert red_ai.tool_calls[0]["args"]["cfg"]["token"] == "Bearer [REDACTED:jwt]"
    assert red_ai.tool_calls[0]["args"]["user"] == "bob"
    assert red_ai.additional_kwargs["function_call"]["arguments"] == '{"key": "[REDACTED:api_key]"}'
    assert red_tool.content == "ok [REDACTED:api_key]"
    assert red_tool.tool_call_id == "c1"
    assert red_tool.artifact == {"raw": "password=[REDACTED:password] [REDACTED:card_number]"}
    assert r.count_markers([red_ai, red_tool]) == 6


def test_interrupt_and_send(r: Redactor) -> None:
    interrupt = Interrupt(value={"question": f"run with {AWS}?"}, id="i1")
    assert r.redact(interrupt) == Interrupt(
        value={"question": "run with [REDACTED:api_key]?"}, id="i1"
    )
    send = r.redact(Send("node", {"k": OPENAI}))
    assert isinstance(send, Send)
    assert send.node == "node"
    assert send.arg == {"k": "[REDACTED:api_key]"}


# -- custom rules and markers --------------------------------------------------------------
def test_custom_rules_and_marker() -> None:
    def shout(text: str) -> str:
        return text.replace("ACME", "<vendor>")

    redactor = Redactor(
        detectors=[CARD_NUMBER],
        extra=[r"EMP-\d{6}", ("ticket", re.compile(r"TCK\d+")), shout],
        marker="<{kind}>",
    )
    text, count = redactor.redact_text(f"EMP-123456 TCK42 ACME {VISA} {OPENAI}")
    assert text == f"<custom> <ticket> <vendor> <card_number> {OPENAI}"
    assert count == 4
    assert redactor.redact_text(text) == (text, 0)


def test_callable_without_markers_counts_one() -> None:
    redactor = Redactor(detectors=(), extra=[lambda text: text.replace("x", "*")])
    assert redactor.redact_text("xxx") == ("***", 1)
    assert redactor.redact_text("abc") == ("abc", 0)


def test_detector_object_and_default_order() -> None:
    assert DEFAULT_DETECTORS[0].kind == "private_key"
    assert API_KEY in DEFAULT_DETECTORS
    custom = Detector("pin", re.compile(r"PIN (?P<secret>\d{4})"))
    assert Redactor(detectors=[custom]).redact("PIN 1234") == "PIN [REDACTED:pin]"


@pytest.mark.parametrize("bad", [42, ("kind",), ("kind", 3)])
def test_invalid_rules(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        Redactor(extra=[bad])


def test_invalid_marker_and_option() -> None:
    with pytest.raises(InvalidArgumentError):
        Redactor(marker="")
    with pytest.raises(InvalidArgumentError):
        _Saver(InMemorySaver(), redact="yes")  # type: ignore[arg-type]


# -- the mixin over an InMemorySaver ---------------------------------------------------------
_Saver = STMSaver


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def test_mixin_put_and_put_writes() -> None:
    saver = _Saver(InMemorySaver(), redact=True)
    saver.setup()
    checkpoint = empty_checkpoint()
    message = HumanMessage(f"key {OPENAI}", id="h1")
    checkpoint["channel_values"] = {"messages": [message], "goal": f"use {AWS}"}
    checkpoint["channel_versions"] = {"messages": 1, "goal": 1}
    live = copy.deepcopy(checkpoint)
    metadata: Any = {"source": "input", "step": -1, "parents": {}, "note": "pw password=x1"}
    stored = saver.put(_config("t1"), checkpoint, metadata, {"messages": 1, "goal": 1})
    assert checkpoint == live
    assert metadata["note"] == "pw password=x1"
    saver.put_writes(stored, [("messages", AIMessage(f"got {GITHUB}", id="a1"))], "task-1")
    tup = saver.get_tuple(_config("t1"))
    assert tup is not None
    assert tup.checkpoint["channel_values"]["messages"][0].content == "key [REDACTED:api_key]"
    assert tup.checkpoint["channel_values"]["goal"] == "use [REDACTED:api_key]"
    stored_metadata: dict[str, Any] = dict(tup.metadata)
    assert stored_metadata["note"] == "pw password=[REDACTED:password]"
    assert stored_metadata[METADATA_KEY] == 3
    assert tup.pending_writes is not None
    [(_, channel, value)] = tup.pending_writes
    assert channel == "messages"
    assert value.content == "got [REDACTED:api_key]"
    assert saver.redaction_count("t1") == 3
    assert saver.redaction_count("unknown") == 0
    state = saver.get_thread_state("t1")
    assert state is not None
    assert state.goal == "use [REDACTED:api_key]"


async def test_mixin_async() -> None:
    saver = _Saver(InMemorySaver(), redact=Redactor(detectors=[API_KEY]))
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"goal": f"use {AWS} and password=kept"}
    checkpoint["channel_versions"] = {"goal": 1}
    metadata: Any = {"source": "input", "step": -1, "parents": {}}
    stored = await saver.aput(_config("t2"), checkpoint, metadata, {"goal": 1})
    await saver.aput_writes(stored, [("goal", f"now {SLACK}")], "task-1")
    tup = await saver.aget_tuple(_config("t2"))
    assert tup is not None
    assert tup.pending_writes is not None
    assert tup.checkpoint["channel_values"]["goal"] == "use [REDACTED:api_key] and password=kept"
    assert tup.pending_writes[0][2] == "now [REDACTED:api_key]"
    assert await saver.aredaction_count("t2") == 1


def test_redact_off_passes_through() -> None:
    saver = _Saver(InMemorySaver())
    assert saver.redactor is None
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"goal": f"use {AWS}"}
    checkpoint["channel_versions"] = {"goal": 1}
    metadata: Any = {"source": "input", "step": -1, "parents": {}}
    saver.put(_config("t3"), checkpoint, metadata, {"goal": 1})
    tup = saver.get_tuple(_config("t3"))
    assert tup is not None
    assert tup.checkpoint["channel_values"]["goal"] == f"use {AWS}"
    assert METADATA_KEY not in tup.metadata


def test_dict_and_list_subclasses(r: Redactor) -> None:
    from collections import OrderedDict, defaultdict, namedtuple

    ordered = r.redact(OrderedDict(k=f"x {AWS}"))
    assert type(ordered) is OrderedDict
    assert ordered == {"k": "x [REDACTED:api_key]"}
    default: defaultdict[str, str] = defaultdict(str, k=AWS)
    redacted = r.redact(default)
    assert type(redacted) is defaultdict
    assert redacted.default_factory is str
    assert redacted["k"] == "[REDACTED:api_key]"
    pair = namedtuple("pair", "a b")
    assert r.redact(pair(AWS, 1)) == pair("[REDACTED:api_key]", 1)


def test_clean_checkpoint_metadata_has_no_count() -> None:
    saver = _Saver(InMemorySaver(), redact=True)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"goal": "nothing secret"}
    checkpoint["channel_versions"] = {"goal": 1}
    metadata: Any = {"source": "input", "step": -1, "parents": {}}
    saver.put(_config("t4"), checkpoint, metadata, {"goal": 1})
    tup = saver.get_tuple(_config("t4"))
    assert tup is not None
    assert METADATA_KEY not in tup.metadata
    assert saver.redaction_count("t4") == 0
