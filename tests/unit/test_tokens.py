"""TokenCounter and load_encoding: exact, offline, cached counts."""

from __future__ import annotations

import ast
import datetime
import enum
import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from langgraph_stm import TokenCounter, _tokens
from langgraph_stm._tokens import (
    _SPECS,
    IMAGE_TOKENS,
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TOKENS_PER_TOOL_CALL,
    _deep_json,
    load_encoding,
)
from langgraph_stm.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    STMError,
    TokenizerError,
)

SAMPLES = {
    "english": "The quick brown fox jumps over the lazy dog. It's 3:45pm and we're shipping v2.0!",
    "chinese": "我们明天把计费系统迁移到第二版，请不要给外部域名发邮件。",
    "code": "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "emoji": "Deploy done 🚀🎉 — all green ✅ (👍🏽 from ops)",
    "json": json.dumps(
        {
            "tool": "search",
            "args": {"query": "billing v2 migration", "limit": 10, "filters": [None, True, 1.5]},
        }
    ),
    "special": "text with <|endoftext|> inside",
}

# Computed once with tiktoken 0.14 itself (tiktoken.get_encoding(...).encode_ordinary),
# loading the official files through tiktoken's own loader.
REFERENCE_COUNTS = {
    "cl100k_base": {
        "english": 26,
        "chinese": 27,
        "code": 31,
        "emoji": 23,
        "json": 38,
        "special": 9,
    },
    "o200k_base": {
        "english": 24,
        "chinese": 22,
        "code": 31,
        "emoji": 17,
        "json": 38,
        "special": 10,
    },
}
REFERENCE_IDS = {
    "cl100k_base": [791, 4062, 14198, 39935, 35308, 927, 279, 16053],
    "o200k_base": [976, 4853, 19705, 68347, 65613, 1072, 290, 29082],
}
DATA_DIR = Path(__file__).resolve().parents[2] / "langgraph_stm" / "_data"


class TestOfflineEncodings:
    """load_encoding builds tiktoken encodings from shipped, verified files."""

    @pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
    def test_reference_counts_match_tiktoken(self, name: str) -> None:
        """Counts of English, Chinese, code, emoji and JSON equal tiktoken's own counts."""
        counter = TokenCounter(encoding=name)
        counts = {key: counter.count_text(text) for key, text in SAMPLES.items()}
        assert counts == REFERENCE_COUNTS[name]
        assert load_encoding(name).encode_ordinary(SAMPLES["english"])[:8] == REFERENCE_IDS[name]

    def test_offline_with_sockets_blocked_writes_nothing(self, tmp_path: Path) -> None:
        """A fresh process with sockets blocked and an empty cache dir counts exactly.

        It must not touch the network and must write nothing: the cache dir stays empty
        and no file appears in the package data folder or the temp dir's tiktoken cache.
        """
        cache = tmp_path / "tiktoken-cache"
        cache.mkdir()
        script = textwrap.dedent(
            f"""
            import socket, json
            class BlockedSocket(socket.socket):
                def __init__(self, *a, **k):
                    raise OSError("network is blocked in this test")
            def refuse(*a, **k):
                raise OSError("network is blocked in this test")
            socket.socket = BlockedSocket
            socket.create_connection = refuse
            from langgraph_stm import TokenCounter
            samples = json.loads({json.dumps(json.dumps(SAMPLES))})
            out = {{}}
            for name in ("cl100k_base", "o200k_base"):
                c = TokenCounter(encoding=name)
                out[name] = {{k: c.count_text(v) for k, v in samples.items()}}
            print(json.dumps(out))
            """
        )
        before = sorted(p.name for p in DATA_DIR.iterdir())
        env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "TMPDIR": str(tmp_path)}
        env.pop("DATA_GYM_CACHE_DIR", None)
        result = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        assert json.loads(result.stdout) == REFERENCE_COUNTS
        assert list(cache.iterdir()) == []
        assert not (tmp_path / "data-gym-cache").exists()
        assert sorted(p.name for p in DATA_DIR.iterdir()) == before

    def test_in_process_load_never_opens_a_socket(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Building an encoding in this process opens no socket."""

        class BlockedSocket(socket.socket):
            def __init__(self, *args: object, **kwargs: object) -> None:
                raise AssertionError("load_encoding tried to open a socket")

        monkeypatch.setattr(socket, "socket", BlockedSocket)
        load_encoding.cache_clear()
        try:
            assert TokenCounter(encoding="cl100k_base").count_text(SAMPLES["code"]) == 31
        finally:
            load_encoding.cache_clear()

    @pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
    def test_identical_to_tiktoken_loader(self, name: str, tmp_path: Path) -> None:
        """Our encoding equals the one tiktoken builds itself from the same official file."""
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        cache_key = hashlib.sha1(url.encode()).hexdigest()
        (tmp_path / cache_key).write_bytes(
            gzip.decompress((DATA_DIR / f"{name}.tiktoken.gz").read_bytes())
        )
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tmp_path)
        try:
            from tiktoken_ext import openai_public

            theirs = tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[name]())
        finally:
            if previous is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
        ours = load_encoding(name)
        assert ours._pat_str == theirs._pat_str
        assert ours._special_tokens == theirs._special_tokens
        assert ours.n_vocab == theirs.n_vocab
        corpus = "\n".join(SAMPLES.values()) * 3 + " ".join(chr(c) for c in range(32, 5000, 7))
        assert ours.encode_ordinary(corpus) == theirs.encode_ordinary(corpus)

    def test_corrupted_file_is_refused(self, tmp_path: Path) -> None:
        """A data file whose sha256 does not match is refused with a clear error."""
        raw = bytearray(gzip.decompress((DATA_DIR / "cl100k_base.tiktoken.gz").read_bytes()))
        raw[100] ^= 0x01
        (tmp_path / "cl100k_base.tiktoken").write_bytes(bytes(raw))
        with pytest.raises(TokenizerError, match=r"cl100k_base.*corrupted: sha256"):
            load_encoding("cl100k_base", tmp_path)

    def test_missing_file_is_refused(self, tmp_path: Path) -> None:
        """A data_dir without the file gives an error naming the folder."""
        with pytest.raises(TokenizerError, match=r"no o200k_base\.tiktoken"):
            load_encoding("o200k_base", tmp_path)

    def test_unknown_encoding_lists_available_ones(self) -> None:
        """An unknown encoding name names the ones we ship."""
        with pytest.raises(TokenizerError, match=r"unknown encoding 'p50k_base'.*cl100k_base"):
            TokenCounter(encoding="p50k_base")

    def test_specs_match_installed_tiktoken(self) -> None:
        """Our pinned hashes, regexes and special tokens equal tiktoken's definitions."""
        from tiktoken_ext import openai_public

        for name, spec in _SPECS.items():
            seen: dict[str, object] = {}

            def fake_load(url: str, expected_hash: str, _seen: dict[str, object] = seen) -> dict:
                _seen["hash"] = expected_hash
                return {}

            original = openai_public.load_tiktoken_bpe
            openai_public.load_tiktoken_bpe = fake_load  # type: ignore[assignment]
            try:
                definition = openai_public.ENCODING_CONSTRUCTORS[name]()
            finally:
                openai_public.load_tiktoken_bpe = original
            assert seen["hash"] == spec.sha256
            assert definition["pat_str"] == spec.pat_str
            assert definition["special_tokens"] == spec.special_tokens


class TestModelNames:
    """Model names map to encodings through tiktoken's public table."""

    @pytest.mark.parametrize(
        ("model", "encoding"),
        [
            ("gpt-4o", "o200k_base"),
            ("gpt-4o-mini", "o200k_base"),
            ("openai:gpt-4.1", "o200k_base"),
            ("gpt-4", "cl100k_base"),
            ("gpt-3.5-turbo", "cl100k_base"),
            ("text-embedding-3-small", "cl100k_base"),
        ],
    )
    def test_model_selects_encoding(self, model: str, encoding: str) -> None:
        """A known model name selects its encoding (provider prefixes are ignored)."""
        assert TokenCounter(model=model).encoding_name == encoding

    def test_default_is_o200k(self) -> None:
        """With neither model nor encoding, the counter uses o200k_base."""
        assert TokenCounter().encoding_name == "o200k_base"

    def test_unknown_model_is_a_clear_error(self) -> None:
        """An unknown model asks for an explicit encoding."""
        with pytest.raises(TokenizerError, match="pass encoding="):
            TokenCounter(model="claude-sonnet-4")

    def test_model_and_encoding_together_are_rejected(self) -> None:
        """Passing both model and encoding is ambiguous."""
        with pytest.raises(ValueError, match="not both"):
            TokenCounter(model="gpt-4o", encoding="cl100k_base")


class TestMessageFormula:
    """count(messages) follows the documented OpenAI chat framing formula."""

    @pytest.fixture
    def counter(self) -> TokenCounter:
        return TokenCounter(encoding="cl100k_base")

    def tok(self, counter: TokenCounter, text: str) -> int:
        return len(load_encoding(counter.encoding_name).encode_ordinary(text))

    def test_plain_messages(self, counter: TokenCounter) -> None:
        """System, human and AI messages cost framing + role + content."""
        msgs = [
            SystemMessage("You are terse.", id="s"),
            HumanMessage(SAMPLES["english"], id="h"),
            AIMessage(SAMPLES["chinese"], id="a"),
        ]
        expected = REPLY_PRIMING + sum(
            TOKENS_PER_MESSAGE + self.tok(counter, role) + self.tok(counter, str(m.content))
            for role, m in zip(["system", "user", "assistant"], msgs, strict=True)
        )
        assert counter(msgs) == expected

    def test_name_adds_name_tokens(self, counter: TokenCounter) -> None:
        """A named message adds TOKENS_PER_NAME plus the name's tokens."""
        plain = HumanMessage("hi", id="h1")
        named = HumanMessage("hi", id="h2", name="alice_smith")
        delta = counter.count_message(named) - counter.count_message(plain)
        assert delta == TOKENS_PER_NAME + self.tok(counter, "alice_smith")

    def test_parallel_tool_calls_and_results(self, counter: TokenCounter) -> None:
        """Each tool call adds its overhead, name and JSON arguments; results count as tool."""
        calls = [
            {"name": "search", "args": {"q": "billing v2", "limit": 5}, "id": "c1"},
            {"name": "get_weather", "args": {"city": "Zürich"}, "id": "c2"},
            {"name": "noop", "args": {}, "id": "c3"},
        ]
        ai = AIMessage("Let me check.", id="a1", tool_calls=calls)
        results = [
            ToolMessage(SAMPLES["json"], tool_call_id="c1", id="t1"),
            ToolMessage("sunny, 21°C", tool_call_id="c2", id="t2"),
            ToolMessage("", tool_call_id="c3", id="t3"),
        ]
        expected_ai = TOKENS_PER_MESSAGE + self.tok(counter, "assistant")
        expected_ai += self.tok(counter, "Let me check.")
        for call in calls:
            arguments = json.dumps(call["args"], ensure_ascii=False)
            expected_ai += TOKENS_PER_TOOL_CALL + self.tok(counter, str(call["name"]))
            expected_ai += self.tok(counter, arguments)
        assert counter.count_message(ai) == expected_ai
        expected_results = [
            TOKENS_PER_MESSAGE + self.tok(counter, "tool") + self.tok(counter, str(t.content))
            for t in results
        ]
        assert [counter.count_message(t) for t in results] == expected_results
        assert counter([ai, *results]) == REPLY_PRIMING + expected_ai + sum(expected_results)

    def test_content_blocks(self, counter: TokenCounter) -> None:
        """Text blocks count their text, images a flat cost, other blocks their JSON."""
        other = {"type": "reasoning", "summary": "thinking"}
        msg = HumanMessage(
            [
                {"type": "text", "text": "look at this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                other,
            ],
            id="h",
        )
        expected = (
            TOKENS_PER_MESSAGE + self.tok(counter, "user") + self.tok(counter, "look at this")
        )
        expected += IMAGE_TOKENS + self.tok(counter, json.dumps(other, ensure_ascii=False))
        assert counter.count_message(msg) == expected

    def test_chat_message_uses_its_role(self, counter: TokenCounter) -> None:
        """A ChatMessage counts its own role string."""
        msg = ChatMessage("x", role="developer", id="d")
        assert counter.count_message(msg) == TOKENS_PER_MESSAGE + self.tok(counter, "developer") + 1

    def test_empty_list_costs_reply_priming(self, counter: TokenCounter) -> None:
        """No messages cost only the reply priming."""
        assert counter([]) == REPLY_PRIMING

    def test_non_message_is_rejected(self, counter: TokenCounter) -> None:
        """A dict or string in the list is a clear InvalidMessageError."""
        with pytest.raises(InvalidMessageError, match="expected a LangChain BaseMessage, got dict"):
            counter([{"role": "user", "content": "hi"}])  # type: ignore[list-item]

    def test_plugs_into_langchain_trim_messages(self, counter: TokenCounter) -> None:
        """The counter works as trim_messages' token_counter."""
        msgs = [HumanMessage(f"message number {i}", id=f"h{i}") for i in range(10)]
        kept = trim_messages(msgs, max_tokens=counter(msgs[-3:]), token_counter=counter)
        assert kept == msgs[-3:]


class TestCache:
    """Per-message caching keyed by id and counted content."""

    def history(self, n: int) -> list[HumanMessage | AIMessage]:
        return [
            (HumanMessage if i % 2 == 0 else AIMessage)(
                f"turn {i}: {SAMPLES['english']}", id=f"m{i}"
            )
            for i in range(n)
        ]

    def test_cached_equals_uncached(self) -> None:
        """Counts with a warm cache equal counts with no cache at all."""
        msgs = self.history(50)
        cached = TokenCounter(encoding="o200k_base")
        uncached = TokenCounter(encoding="o200k_base", cache_size=0)
        assert cached(msgs) == uncached(msgs)
        assert cached(msgs) == uncached(msgs)
        assert uncached.cache_info().size == 0

    def test_recount_tokenizes_only_new_messages(self) -> None:
        """After one new message, a recount of the history tokenizes only that message."""
        counter = TokenCounter(encoding="o200k_base")
        msgs = self.history(200)
        counter(msgs)
        assert counter.cache_info().misses == 200
        msgs.append(HumanMessage("one more", id="new"))
        counter(msgs)
        info = counter.cache_info()
        assert (info.misses, info.hits) == (201, 200)

    def test_changed_content_with_same_id_is_recounted(self) -> None:
        """Editing a message's content under the same id gives the new count."""
        counter = TokenCounter(encoding="cl100k_base")
        before = counter.count_message(HumanMessage("short", id="x"))
        after = counter.count_message(HumanMessage(SAMPLES["english"], id="x"))
        assert after - before == 26 - 1

    def test_changed_tool_args_with_same_id_are_recounted(self) -> None:
        """Editing tool-call arguments under the same id gives the new count."""
        counter = TokenCounter(encoding="cl100k_base")

        def call(q: str) -> AIMessage:
            return AIMessage("", id="a", tool_calls=[{"name": "s", "args": {"q": q}, "id": "c"}])

        assert counter.count_message(call("a b c d e f")) > counter.count_message(call("a"))

    def test_cache_is_bounded(self) -> None:
        """The cache evicts the least recently used entries past its size."""
        counter = TokenCounter(encoding="cl100k_base", cache_size=10)
        counter(self.history(25))
        assert counter.cache_info().size == 10
        counter.cache_clear()
        assert counter.cache_info() == type(counter.cache_info())(0, 0, 0, 10)


def nested(depth: int, leaf: Any = None) -> dict[str, Any]:
    """``{"a": {"a": ... leaf}}`` with ``depth`` levels, built without recursion."""
    value: Any = {} if leaf is None else leaf
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[no-any-return]


def nested_json(depth: int) -> str:
    """The JSON of ``nested(depth)``, written by hand."""
    return '{"a": ' * depth + "{}" + "}" * depth


def tool_call(args: Any, *, name: str = "search", message_id: str = "a1") -> AIMessage:
    """An AI message with one tool call ``c1`` of ``name`` with ``args``."""
    return AIMessage("", id=message_id, tool_calls=[{"name": name, "args": args, "id": "c1"}])


def tool_call_cost(counter: TokenCounter, name: str, arguments: str) -> int:
    """The documented count of an empty AI message with one tool call."""
    return (
        TOKENS_PER_MESSAGE
        + counter.count_text("assistant")
        + TOKENS_PER_TOOL_CALL
        + counter.count_text(name)
        + counter.count_text(arguments)
    )


def json_dumps(value: Any) -> str:
    """What the module docstring says arguments and other blocks count as."""
    return json.dumps(value, ensure_ascii=False, default=str)


class Color(enum.IntEnum):
    RED = 1


class Tag(str):
    pass


JSON_KEYS = st.one_of(st.text(max_size=5), st.integers(), st.floats(), st.booleans(), st.none())
JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from([Color.RED, Tag("tag"), datetime.date(2024, 5, 1), uuid.UUID(int=7)]),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(JSON_KEYS, children, max_size=4),
    ),
    max_leaves=25,
)


class TestDeepArguments:
    """Arguments and content nested at any depth are counted, with json.dumps' output."""

    @pytest.fixture
    def counter(self) -> TokenCounter:
        return TokenCounter(encoding="cl100k_base")

    def test_args_nested_5000_levels_count_their_json(self, counter: TokenCounter) -> None:
        """Tool-call arguments nested 5,000 levels deep count the tokens of their JSON."""
        message = tool_call(nested(5000))
        assert counter.count_message(message) == tool_call_cost(
            counter, "search", nested_json(5000)
        )

    def test_depth_far_beyond_the_recursion_limit_is_counted(self, counter: TokenCounter) -> None:
        """No depth limit: arguments 20 times deeper than the recursion limit count too."""
        depth = sys.getrecursionlimit() * 20
        message = tool_call(nested(depth))
        assert counter.count_message(message) == tool_call_cost(
            counter, "search", nested_json(depth)
        )

    def test_deep_content_block_counts_its_json(self, counter: TokenCounter) -> None:
        """A non-text content block nested 5,000 levels deep counts the tokens of its JSON."""
        block = {"type": "reasoning", "steps": nested(5000)}
        message = HumanMessage([block], id="h1")
        expected = TOKENS_PER_MESSAGE + counter.count_text("user")
        expected += counter.count_text('{"type": "reasoning", "steps": ' + nested_json(5000) + "}")
        assert counter.count_message(message) == expected

    def test_deep_arguments_are_cached_like_any_other(self, counter: TokenCounter) -> None:
        """Recounting a deep message is a cache hit with the same count."""
        message = tool_call(nested(3000))
        first = counter.count_message(message)
        assert counter.count_message(message) == first
        assert (counter.cache_info().hits, counter.cache_info().misses) == (1, 1)

    def test_shallow_arguments_keep_their_counts(self, counter: TokenCounter) -> None:
        """Ordinary arguments count exactly json.dumps(args, ensure_ascii=False), as before."""
        args = {"q": "Zürich 计费 🚀", "limit": 5, "filters": [None, True, 1.5], "n": {"x": []}}
        assert counter.count_message(tool_call(args)) == tool_call_cost(
            counter, "search", json.dumps(args, ensure_ascii=False)
        )

    @given(JSON_VALUES)
    def test_deep_encoder_writes_what_json_dumps_writes(self, value: Any) -> None:
        """The iterative encoder's output equals json.dumps' for any JSON-like value."""
        assert _deep_json(value) == json_dumps(value)

    def test_deep_encoder_matches_json_dumps_near_the_recursion_limit(self) -> None:
        """Just below the depth where json.dumps gives up, both write the same text."""
        value = [nested(300, leaf=[1.5, float("nan"), {2: "x", None: True}])]
        assert _deep_json(value) == json_dumps(value)


class TestJsonKeys:
    """Dict keys are written the way json.dumps writes them, or refused by message id."""

    @pytest.fixture
    def counter(self) -> TokenCounter:
        return TokenCounter(encoding="cl100k_base")

    def test_int_key_in_a_text_block_is_ignored_like_any_extra_key(
        self, counter: TokenCounter
    ) -> None:
        """A text block with an int key counts its text; the extra key costs nothing."""
        with_key = HumanMessage([{"type": "text", "text": "hello", 1: "x"}], id="h1")
        without = HumanMessage([{"type": "text", "text": "hello"}], id="h2")
        assert counter.count_message(with_key) == counter.count_message(without)
        bare = HumanMessage([{"type": "text", 1: "x"}], id="h3")
        assert counter.count_message(bare) == TOKENS_PER_MESSAGE + counter.count_text("user")

    def test_non_str_keys_of_other_blocks_count_as_json_writes_them(
        self, counter: TokenCounter
    ) -> None:
        """Int, float, bool and None keys count as their JSON strings ("1", "true"...)."""
        block = {"type": "reasoning", 3: "x", 2.5: "y", True: "z", None: "w"}
        message = HumanMessage([block], id="h1")
        written = '{"type": "reasoning", "3": "x", "2.5": "y", "true": "z", "null": "w"}'
        assert json_dumps(block) == written
        expected = TOKENS_PER_MESSAGE + counter.count_text("user") + counter.count_text(written)
        assert counter.count_message(message) == expected

    def test_nested_int_keys_in_arguments_count_as_json_writes_them(
        self, counter: TokenCounter
    ) -> None:
        """An int key inside tool-call arguments counts as its quoted JSON string."""
        message = tool_call({"rows": {1: "first", 2: "second"}})
        written = '{"rows": {"1": "first", "2": "second"}}'
        assert counter.count_message(message) == tool_call_cost(counter, "search", written)

    def test_same_blocks_with_reordered_keys_are_each_counted_as_written(
        self, counter: TokenCounter
    ) -> None:
        """Under one id, a block with its keys reordered is recounted, not taken from cache."""
        first = HumanMessage([{"type": "reasoning", "a": "one two", "b": 3}], id="h1")
        second = HumanMessage([{"type": "reasoning", "b": 3, "a": "one two"}], id="h1")
        for message in (first, second):
            expected = TOKENS_PER_MESSAGE + counter.count_text("user")
            expected += counter.count_text(json_dumps(message.content[0]))
            assert counter.count_message(message) == expected
        assert counter.cache_info().misses == 2

    def test_tuple_key_in_arguments_is_an_error_naming_the_message(
        self, counter: TokenCounter
    ) -> None:
        """A key JSON cannot write raises InvalidMessageError naming message and tool call."""
        message = tool_call({"grid": {(1, 2): "x"}}, message_id="a7")
        with pytest.raises(
            InvalidMessageError, match=r"id='a7'.*tool call id='c1' \('search'\).*not tuple"
        ):
            counter.count_message(message)

    def test_tuple_key_in_content_is_an_error_naming_the_message(
        self, counter: TokenCounter
    ) -> None:
        """A content block with a tuple key raises InvalidMessageError naming the message."""
        message = HumanMessage([{"type": "reasoning", (1, 2): "x"}], id="h7")
        with pytest.raises(InvalidMessageError, match=r"id='h7'.*content.*not tuple"):
            counter([message])

    def test_tuple_key_deeper_than_the_recursion_limit_is_the_same_error(
        self, counter: TokenCounter
    ) -> None:
        """The iterative encoder refuses bad keys with the same InvalidMessageError."""
        message = tool_call(nested(5000, leaf={(1, 2): "x"}), message_id="a8")
        with pytest.raises(InvalidMessageError, match=r"id='a8'.*not tuple"):
            counter.count_message(message)

    @pytest.mark.parametrize("depth", [1, 5000])
    def test_circular_arguments_are_an_error_naming_the_message(
        self, counter: TokenCounter, depth: int
    ) -> None:
        """Arguments that contain themselves (short or long cycle) raise InvalidMessageError."""
        inner: dict[str, Any] = {}
        args = nested(depth - 1, leaf=inner)
        inner["loop"] = args
        with pytest.raises(InvalidMessageError, match=r"id='a1'.*Circular reference"):
            counter.count_message(tool_call(args))


class TestErrors:
    """Every error TokenCounter raises on purpose is an STMError with a helpful message."""

    def test_model_and_encoding_together_raise_invalid_argument_error(self) -> None:
        """Both model= and encoding= is an InvalidArgumentError naming both values."""
        with pytest.raises(InvalidArgumentError, match=r"not both.*'gpt-4o'.*'cl100k_base'"):
            TokenCounter(model="gpt-4o", encoding="cl100k_base")

    @pytest.mark.parametrize("cache_size", [-1, 1.5, "10", True, None])
    def test_bad_cache_size_raises_invalid_argument_error(self, cache_size: Any) -> None:
        """cache_size must be an int >= 0 (a bool is not a size)."""
        with pytest.raises(InvalidArgumentError, match="cache_size must be an int >= 0"):
            TokenCounter(cache_size=cache_size)

    @pytest.mark.parametrize("argument", ["model", "encoding"])
    def test_non_str_model_or_encoding_raises_invalid_argument_error(self, argument: str) -> None:
        """A model or encoding that is not a str is an InvalidArgumentError naming it."""
        with pytest.raises(InvalidArgumentError, match=f"{argument} must be a str"):
            TokenCounter(**{argument: 4})  # type: ignore[arg-type]

    def test_argument_errors_are_value_errors_and_stm_errors(self) -> None:
        """InvalidArgumentError is caught by except ValueError and by except STMError."""
        with pytest.raises(ValueError, match="cache_size") as info:
            TokenCounter(cache_size=-5)
        assert isinstance(info.value, STMError)

    def test_zero_cache_size_is_accepted(self) -> None:
        """cache_size=0 disables the cache; it is not an error."""
        assert TokenCounter(encoding="cl100k_base", cache_size=0).cache_info().max_size == 0

    def test_data_dir_may_be_a_str(self) -> None:
        """data_dir accepts a str path as well as a Path."""
        counter = TokenCounter(encoding="cl100k_base", data_dir=str(DATA_DIR))
        assert counter.count_text(SAMPLES["english"]) == REFERENCE_COUNTS["cl100k_base"]["english"]

    def test_mutated_content_is_an_invalid_message_error(self) -> None:
        """Content assigned a type LangChain refuses raises InvalidMessageError naming the id."""
        message = HumanMessage("hi", id="h5")
        message.content = 5  # type: ignore[assignment]
        with pytest.raises(InvalidMessageError, match=r"id='h5' is malformed"):
            TokenCounter(encoding="cl100k_base").count_message(message)

    def test_mutated_tool_call_name_is_an_invalid_message_error(self) -> None:
        """A tool call whose name was set to a non-str raises InvalidMessageError."""
        message = tool_call({"q": "x"}, message_id="a5")
        message.tool_calls[0]["name"] = None  # type: ignore[typeddict-item]
        with pytest.raises(InvalidMessageError, match=r"id='a5' is malformed"):
            TokenCounter(encoding="cl100k_base").count_message(message)

    def test_every_raise_in_the_module_is_an_stm_error(self) -> None:
        """Each ``raise SomeError(...)`` in _tokens.py raises an STMError subclass.

        The JSON writer's own TypeError/ValueError (the ones json.dumps raises) are the
        exception: _to_json turns them into InvalidMessageError, as tested above.
        """
        internal = {"_key_json", "_deep_json"}
        tree = ast.parse(Path(_tokens.__file__).read_text(encoding="utf-8"))
        raised: list[tuple[str, str]] = []
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef) or function.name in internal:
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    assert isinstance(node.exc.func, ast.Name)
                    raised.append((function.name, node.exc.func.id))
        assert raised
        not_stm = [
            (where, name)
            for where, name in raised
            if not issubclass(getattr(_tokens, name), STMError)
        ]
        assert not_stm == []
