"""TokenCounter and load_encoding: exact, offline, cached counts."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tiktoken
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from langgraph_stm import InvalidMessageError, TokenCounter, TokenizerError, load_encoding
from langgraph_stm._tokens import (
    _SPECS,
    IMAGE_TOKENS,
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TOKENS_PER_TOOL_CALL,
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
