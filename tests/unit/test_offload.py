"""Spec of Offloader: long tool text goes to a store, the message keeps a summary."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langgraph_stm import TokenCounter
from langgraph_stm._offload import (
    OFFLOAD_NAMESPACE,
    Offloaded,
    Offloader,
    adelete_offloaded,
    artifact_id,
    delete_offloaded,
    extract_summary,
    offload_namespace,
    offload_uri,
    parse_offload_uri,
)
from langgraph_stm.errors import InvalidArgumentError, InvalidMessageError
from langgraph_stm.state import merge_artifacts

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
COUNTER = TokenCounter()


def log_lines(n: int) -> str:
    """``n`` lines of a tool's log output."""
    return "\n".join(f"record {i}: status=ok latency={i % 97}ms" for i in range(n))


def result(content: Any = None, *, id: str | None = "m1", **kwargs: Any) -> ToolMessage:
    """A ToolMessage answering call ``c1`` (a long log by default)."""
    body = log_lines(500) if content is None else content
    return ToolMessage(body, tool_call_id="c1", name="fetch_logs", id=id, **kwargs)


def offloaded(offloader: Offloader, message: ToolMessage, config: Any = CONFIG) -> Offloaded:
    done = offloader.offload(message, config=config)
    assert done is not None
    return done


class Recorder:
    """A store callable that keeps what it is given."""

    def __init__(self, uri: object = None) -> None:
        self.calls: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []
        self.uri = uri

    def __call__(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> Any:
        self.calls.append((namespace, key, value))
        return self.uri


class TestThreshold:
    """Only a message over ``over_tokens``, counted exactly, is offloaded."""

    def test_message_under_the_limit_is_left_alone(self) -> None:
        """A short output returns None and writes nothing."""
        store = Recorder()
        assert Offloader(2000, store=store).offload(result("sunny"), config=CONFIG) is None
        assert store.calls == []

    def test_message_exactly_at_the_limit_is_left_alone(self) -> None:
        """The limit is inclusive: a message of exactly ``over_tokens`` stays."""
        message = result(log_lines(50))
        tokens = COUNTER.count_message(message)
        assert Offloader(tokens, store=Recorder()).offload(message, config=CONFIG) is None
        assert Offloader(tokens - 1, store=Recorder()).offload(message, config=CONFIG)

    def test_small_message_needs_no_id_thread_or_store(self) -> None:
        """Nothing is checked for a message that stays: it is a no-op."""
        assert Offloader(100).offload(result("ok", id=None), config=None) is None

    def test_over_the_limit_keeps_identity_and_replaces_content(self) -> None:
        """Same id, tool_call_id, name and status; the content is summary + reference."""
        message = result(status="error")
        done = offloaded(Offloader(100, store=Recorder()), message)
        out = done.message
        assert (out.id, out.tool_call_id, out.name, out.status) == (
            "m1",
            "c1",
            "fetch_logs",
            "error",
        )
        assert type(out) is ToolMessage
        assert isinstance(out.content, str)
        assert out.content.startswith("record 0: status=ok latency=0ms\nrecord 1:")
        assert out.content.endswith(f"): {offload_uri('t1', 'm1')}]")
        assert COUNTER.count_message(out) < 300 < COUNTER.count_message(message)
        assert message.content == log_lines(500)  # the input is not modified

    def test_artifact_record_describes_the_output(self) -> None:
        """The artifact carries a deterministic id, the summary, uri and exact tokens."""
        message = result()
        done = offloaded(Offloader(100, store=Recorder()), message)
        assert done.artifact == {
            "id": "stm-offload:m1",
            "kind": "tool_output",
            "summary": done.artifact["summary"],
            "uri": "store://langgraph_stm/offload/t1/m1",
            "source_message_id": "m1",
            "tokens": COUNTER.count_message(message),
        }
        assert done.artifact["summary"] in str(done.message.content)
        assert f"({COUNTER.count_message(message)} tokens)" in str(done.message.content)

    def test_injected_counter_decides(self) -> None:
        """Any Callable[[list[BaseMessage]], int] counts; its per-call overhead is not."""

        def chars(messages: list[BaseMessage]) -> int:
            return 10 + sum(len(m.text) for m in messages)

        offloader = Offloader(20, token_counter=chars, store=Recorder())
        assert offloader.offload(result("x" * 20), config=CONFIG) is None
        done = offloaded(offloader, result("x" * 21))
        assert done.artifact["tokens"] == 21


class TestSummary:
    """The summary is the first lines or sentences, within ``summary_tokens`` exactly."""

    @pytest.mark.parametrize("budget", [5, 20, 200])
    def test_summary_fits_its_budget(self, budget: int) -> None:
        """The summary text never exceeds summary_tokens (counted with the counter)."""
        done = offloaded(Offloader(100, store=Recorder(), summary_tokens=budget), result())
        assert COUNTER.count_text(done.artifact["summary"]) <= budget

    def test_summary_is_whole_lines_when_lines_fit(self) -> None:
        """Cut at a line end, marked with an ellipsis."""
        done = offloaded(Offloader(100, store=Recorder(), summary_tokens=60), result())
        summary = done.artifact["summary"]
        assert summary.endswith("ms ...")
        assert log_lines(500).startswith(summary.removesuffix(" ..."))

    def test_one_long_line_is_cut_at_a_sentence(self) -> None:
        """Without line breaks the summary ends at a sentence."""
        text = " ".join(f"Sentence number {i} says something." for i in range(400))
        done = offloaded(Offloader(100, store=Recorder(), summary_tokens=30), result(text))
        assert done.artifact["summary"].endswith("something. ...")

    def test_text_without_spaces_is_still_bounded(self) -> None:
        """A single giant token run (a base64 blob) is cut mid-word, within budget."""
        text = "QUJD" * 5000
        done = offloaded(Offloader(100, store=Recorder(), summary_tokens=25), result(text))
        summary = done.artifact["summary"]
        assert summary.startswith("QUJD")
        assert COUNTER.count_text(summary) <= 25

    def test_blank_lines_and_trailing_spaces_are_dropped(self) -> None:
        """The summary reads compactly; the stored content stays exact."""
        text = "header   \n\n\n" + log_lines(300)
        store = Recorder()
        done = offloaded(Offloader(100, store=store), result(text))
        assert done.artifact["summary"].startswith("header\nrecord 0:")
        assert store.calls[0][2]["content"] == text

    def test_block_content_keeps_text_and_describes_other_blocks(self) -> None:
        """Text blocks are summarized, an image is described, never dropped silently."""
        blocks: list[Any] = [
            {"type": "image", "source_type": "base64", "data": "AAAA", "mime_type": "image/png"},
            {"type": "text", "text": log_lines(400)},
            "plain string block",
            {"type": "file", "filename": "report.pdf", "mime_type": "application/pdf"},
        ]
        store = Recorder()
        done = offloaded(Offloader(100, store=store), result(blocks))
        assert done.artifact["summary"].startswith("[image block: image/png]\nrecord 0:")
        assert "non-text blocks: image, file" in str(done.message.content)
        assert store.calls[0][2]["content"] == blocks

    def test_extract_summary_returns_short_text_whole(self) -> None:
        """A text already within the budget is returned unchanged, without ellipsis."""
        assert extract_summary("a b", 5, COUNTER.count_text) == "a b"
        assert extract_summary("a b c d", 0, COUNTER.count_text) == ""


class TestStores:
    """The full content goes to a BaseStore, a callable, or the graph's store."""

    def test_in_memory_store_holds_the_full_content(self) -> None:
        """``put`` under the thread's namespace, keyed by the message id."""
        store = InMemoryStore()
        message = result()
        done = offloaded(Offloader(100, store=store), message)
        item = store.get(("langgraph_stm", "offload", "t1"), "m1")
        assert item is not None
        assert item.value == {
            "content": message.content,
            "tool_call_id": "c1",
            "name": "fetch_logs",
            "tokens": done.artifact["tokens"],
        }

    def test_callable_store_receives_namespace_key_and_value(self) -> None:
        """The callable's returned uri is the reference."""
        store = Recorder(uri="s3://bucket/m1")
        done = offloaded(Offloader(100, store=store), result())
        ((namespace, key, value),) = store.calls
        assert (namespace, key) == (("langgraph_stm", "offload", "t1"), "m1")
        assert set(value) == {"content", "tool_call_id", "name", "tokens"}
        assert done.artifact["uri"] == "s3://bucket/m1"
        assert str(done.message.content).endswith(": s3://bucket/m1]")

    def test_callable_returning_none_gets_the_standard_uri(self) -> None:
        """``None`` from the callable means: use ``store://...``."""
        done = offloaded(Offloader(100, store=Recorder()), result())
        assert done.artifact["uri"] == offload_uri("t1", "m1")

    def test_callable_returning_a_non_str_is_refused(self) -> None:
        """A uri must be a str."""
        with pytest.raises(InvalidArgumentError, match="uri"):
            Offloader(100, store=Recorder(uri=42)).offload(result(), config=CONFIG)

    def test_async_callable_with_sync_offload_is_refused_cleanly(self) -> None:
        """The sync twin cannot await; it says so and leaves no coroutine behind."""

        async def put(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> str:
            return "x://1"

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(InvalidArgumentError, match="aoffload"):
                Offloader(100, store=put).offload(result(), config=CONFIG)

    def test_thread_id_with_a_period_is_stored(self) -> None:
        """Store labels cannot hold '.', so it is percent-encoded in the namespace."""
        store = InMemoryStore()
        config = {"configurable": {"thread_id": "user.42"}}
        done = offloaded(Offloader(100, store=store), result(), config)
        assert store.get(("langgraph_stm", "offload", "user%2E42"), "m1") is not None
        assert parse_offload_uri(str(done.artifact["uri"])) == ("user.42", "m1")


class TestErrors:
    """Every refusal names what is missing and how to give it."""

    def test_message_without_id_is_refused(self) -> None:
        """The id is the store key."""
        with pytest.raises(InvalidMessageError, match=r"no id.*ToolMessage\(\.\.\., id="):
            Offloader(100, store=Recorder()).offload(result(id=None), config=CONFIG)

    @pytest.mark.parametrize("config", [{}, {"configurable": {}}, None])
    def test_missing_thread_id_is_refused(self, config: Any) -> None:
        """Outside a graph, the config must carry the thread id."""
        with pytest.raises(InvalidArgumentError, match=r"thread_id|thread id"):
            Offloader(100, store=Recorder()).offload(result(), config=config)

    def test_no_store_outside_a_graph_is_refused(self) -> None:
        """Without store= and outside a graph compiled with one, it says how to give one."""
        with pytest.raises(InvalidArgumentError, match=r"compile\(store="):
            Offloader(100).offload(result(), config=CONFIG)

    def test_non_tool_message_is_refused(self) -> None:
        """Only tool outputs are offloaded."""
        with pytest.raises(InvalidMessageError, match="ToolMessage"):
            Offloader(100).offload(AIMessage("hi", id="a1"), config=CONFIG)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "kwargs", [{"over_tokens": 0}, {"over_tokens": 10, "summary_tokens": -1}]
    )
    def test_bad_limits_are_refused(self, kwargs: dict[str, Any]) -> None:
        """Limits are positive ints."""
        with pytest.raises(InvalidArgumentError):
            Offloader(**kwargs)

    def test_bad_store_is_refused(self) -> None:
        """A store is a BaseStore, a callable, or None."""
        with pytest.raises(InvalidArgumentError, match="BaseStore"):
            Offloader(100, store="sqlite:///x")  # type: ignore[arg-type]


class TestDeterminism:
    """Re-running an offload (a node resumed from the top) changes nothing."""

    def test_same_message_gives_the_same_result(self) -> None:
        """Equal messages and artifacts; the store holds one item."""
        store = InMemoryStore()
        offloader = Offloader(100, store=store)
        first = offloaded(offloader, result())
        second = offloaded(offloader, result())
        assert first == second
        assert len(store.search(offload_namespace("t1"))) == 1

    def test_artifacts_reducer_is_idempotent(self) -> None:
        """The artifact id comes from the message id, so merging twice adds one record."""
        done = offloaded(Offloader(100, store=Recorder()), result())
        merged = merge_artifacts(merge_artifacts([], [done.artifact]), [done.artifact])
        assert merged == [done.artifact]
        assert done.artifact["id"] == artifact_id("m1")

    def test_offloaded_message_is_not_offloaded_again(self) -> None:
        """The replacement is short, so a second pass leaves it alone."""
        offloader = Offloader(400, store=Recorder())
        done = offloaded(offloader, result())
        assert offloader.offload(done.message, config=CONFIG) is None


class TestAsync:
    """``aoffload`` is the twin of ``offload``."""

    async def test_aoffload_matches_offload(self) -> None:
        """Same result through ``aput``."""
        store = InMemoryStore()
        offloader = Offloader(100, store=store)
        done = await offloader.aoffload(result(), config=CONFIG)
        assert done == offloaded(Offloader(100, store=Recorder()), result())
        item = await store.aget(offload_namespace("t1"), "m1")
        assert item is not None
        assert item.value["content"] == log_lines(500)

    async def test_aoffload_awaits_an_async_callable(self) -> None:
        """An async store callable is awaited; its uri is used."""
        calls: list[str] = []

        async def put(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> str:
            calls.append(key)
            return f"blob://{key}"

        done = await Offloader(100, store=put).aoffload(result(), config=CONFIG)
        assert done is not None
        assert (calls, done.artifact["uri"]) == (["m1"], "blob://m1")

    async def test_aoffload_under_the_limit_returns_none(self) -> None:
        """The limit applies the same way."""
        assert await Offloader(100).aoffload(result("ok"), config=CONFIG) is None


class TestReferences:
    """One function builds the reference, one parses it, one names the namespace."""

    @pytest.mark.parametrize(
        ("thread_id", "key"), [("t1", "m1"), ("a/b", "c/d"), ("user.42", "id with space")]
    )
    def test_uri_round_trips(self, thread_id: str, key: str) -> None:
        """Any thread id and key come back as they went in."""
        assert parse_offload_uri(offload_uri(thread_id, key)) == (thread_id, key)

    @pytest.mark.parametrize(
        "uri", ["s3://x/y", "store://langgraph_stm/offload/t1", "store://langgraph_stm/offload//k"]
    )
    def test_foreign_uri_is_refused(self, uri: str) -> None:
        """A reference that is not ours raises InvalidArgumentError."""
        with pytest.raises(InvalidArgumentError):
            parse_offload_uri(uri)

    def test_namespace_encoding_is_injective(self) -> None:
        """Different thread ids never share a namespace."""
        ids = ["a.b", "a%2Eb", "a%b", "ab"]
        assert len({offload_namespace(t) for t in ids}) == len(ids)
        assert offload_namespace("t1")[:2] == OFFLOAD_NAMESPACE

    def test_empty_thread_id_has_no_namespace(self) -> None:
        """An empty thread id is refused."""
        with pytest.raises(InvalidArgumentError):
            offload_namespace("")


class TestDeleteOffloaded:
    """Deleting a thread's offloaded outputs pages through the store."""

    def fill(self, store: InMemoryStore) -> None:
        for i in range(250):
            store.put(offload_namespace("t1"), f"m{i}", {"content": "x"})
        store.put(offload_namespace("t10"), "m1", {"content": "other thread"})
        store.put(("elsewhere",), "m1", {"content": "not ours"})

    def test_deletes_every_page_and_nothing_else(self) -> None:
        """More items than a page are all deleted; 't10' and other namespaces stay."""
        store = InMemoryStore()
        self.fill(store)
        assert delete_offloaded(store, "t1") == 250
        assert store.search(offload_namespace("t1")) == []
        assert store.get(offload_namespace("t10"), "m1") is not None
        assert store.get(("elsewhere",), "m1") is not None
        assert delete_offloaded(store, "t1") == 0

    async def test_async_twin(self) -> None:
        """``adelete_offloaded`` does the same with ``asearch``/``adelete``."""
        store = InMemoryStore()
        self.fill(store)
        assert await adelete_offloaded(store, "t1") == 250
        assert await store.asearch(offload_namespace("t1")) == []
        assert await store.aget(offload_namespace("t10"), "m1") is not None

    def test_empty_thread_id_deletes_nothing(self) -> None:
        """No offload can have an empty thread id, so there is nothing to delete."""
        assert delete_offloaded(InMemoryStore(), "") == 0
