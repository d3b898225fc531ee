"""Benchmark: checkpoint storage of a long thread, plain vs DeltaChannel vs STMSaver.

The workload of issue 5: every turn one ~200-token HumanMessage goes in and the graph's
single node answers with one ~200-token AIMessage, which LangGraph checkpoints three
times (input, after the input is applied, after the answer). Four variants run side by
side in one process, on SQLite (file) and on PostgreSQL (a fresh database):

- ``plain``: ``messages: Annotated[list, add_messages]`` on the plain saver;
- ``delta``: ``messages`` as a ``DeltaChannel`` (beta) with an ``add_messages`` batch
  reducer, on the plain saver;
- ``stm``: the plain ``add_messages`` graph on ``STMSaver(plain saver)``, keeping
  everything;
- ``stm_enc``: the ``stm`` variant with encryption at rest
  (``STMSaver(inner, encryption_key=...)``, AES-256-GCM): its write and reload times
  are reported against ``stm`` as ratios (the cost of encryption; no target);
- ``stm_trim``: the same graph, messages and saver as ``stm``, but the node also trims
  the history to its last ``--trim-tokens`` (4,000) tokens, counted exactly with
  ``TokenCounter()`` (o200k_base): ``plan_trim`` keeps whole human/answer pairs from a
  HumanMessage on, and the node returns ``RemoveMessage(id=...)`` for the older ones
  along with its answer (still one step, three checkpoints a turn).

Reported per variant: bytes on disk at 200 and 400 turns (SQLite: pages in use after a
WAL checkpoint; PostgreSQL: total relation size of every table), growth 200->400, mean
*write time* of a turn (wall time inside the saver's ``put``/``put_writes``) and whole
turn time (``invoke``, which also loads the state), each the median of the 20 turns up
to turn 50 and up to turn 400 (each turn of each variant starts from a collected
heap), and the time to reload the state at the last turn from a
fresh saver (``get_state``, median of 51, order rotated). Turns run with ``durability="sync"`` so
checkpoint writes do not overlap (and compete for the GIL with) the next step.

For ``stm`` and ``stm_trim`` also the *load bytes* at turns 50, 200 and 400 (and at
``--turns`` when the run is shorter): after that turn a fresh saver (a new connection,
nothing cached) calls ``get_tuple`` on the thread, and the bytes of the rows returned by
every statement naming one of our tables (``stm_*``) are added up, counted through the
connection (SQLite: a stand-in ``sqlite3.Connection`` whose cursors count what they
fetch; PostgreSQL: a ``psycopg.Cursor`` subclass as ``cursor_factory``). A row's size
is the sum of its values' (bytes and UTF-8 text by length, numbers 8); the counting is
``benchmarks/byte_meter.py``. Checked: the
trimmed thread's load stays flat, load bytes at the last point <= 1.3 x at the first
(@400 vs @50 in a full run).

Run: ``python benchmarks/bench_storage.py`` (``--turns 100`` for a smoke run,
``--skip-postgres`` without a server, ``--breakdown`` for PostgreSQL bytes per table, ours
being ``stm_bodies``, ``stm_lists``, ``stm_values``, ``stm_refs`` and ``stm_threads``;
``--trim-tokens`` for the window of ``stm_trim``; ``STM_TEST_POSTGRES_URI`` names the
server).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from byte_meter import ByteMeter, CountingSqlite, counting_cursor_class
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langgraph_stm import TokenCounter, trim_history
from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.encryption import generate_key

RELOADS = 51
"""How many times each variant's state is reloaded from a fresh saver (median reported)."""
ENCRYPTION_KEY = generate_key()
"""The key of the ``stm_enc`` variant (a new one per run)."""
STM_VARIANTS = ("stm", "stm_trim")
"""The variants on ``STMSaver``: their load bytes are counted."""
TRIM_TOKENS = 4000
"""Default window of ``stm_trim``: the history after each turn fits in this many tokens."""
LOAD_POINTS = (50, 200, 400)
"""Turns after which a fresh saver's load is counted (plus ``--turns`` if shorter)."""
FLAT_LIMIT = 1.3
"""``stm_trim`` load bytes at the last point may be at most this times the first's."""

ADMIN_URI = os.environ.get("STM_TEST_POSTGRES_URI", "postgresql://postgres@127.0.0.1:5432/postgres")


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Pseudo-words, so messages compress about as well as prose (not like a 30-word loop)."""
    consonants, vowels = "bcdfghklmnprstvwz", "aeiou"
    words = set()
    while len(words) < size:
        syllables = rng.randint(1, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)


def text_of(tokens: int, rng: random.Random, words: list[str]) -> str:
    """About ``tokens`` tokens (``TokenCounter()``, o200k_base) of deterministic pseudo-prose."""
    counter = TokenCounter()
    out: list[str] = []
    while counter([HumanMessage(content=" ".join(out))]) < tokens:
        out.extend(rng.choice(words) for _ in range(10))
    return " ".join(out)


class PlainState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def add_messages_batch(current: list[AnyMessage], batches: Sequence[Any]) -> list[AnyMessage]:
    """DeltaChannel reducer: ``add_messages`` folded over a batch of writes."""
    result = current
    for batch in batches:
        result = add_messages(result, batch)  # type: ignore[assignment]
    return result


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch)]


def build(state: type[Any], saver: BaseCheckpointSaver[Any], answers: Sequence[str]) -> Any:
    def reply(s: Any) -> dict[str, Any]:
        n = len(s["messages"])
        return {"messages": [AIMessage(id=f"ai-{n}", content=answers[(n // 2) % len(answers)])]}

    return StateGraph(state).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)


def build_trimmed(
    saver: BaseCheckpointSaver[Any], answers: Sequence[str], counter: TokenCounter, budget: int
) -> Any:
    """The graph of ``build`` whose node also trims the history to ``budget`` tokens.

    The answer has the id and text ``build``'s node gives it on the untrimmed thread (the
    turn is read from the HumanMessage's id, ``h-<turn>``), so ``stm`` and ``stm_trim``
    write the same messages; the removals go in the same update as the answer.
    """

    def reply(s: PlainState) -> dict[str, Any]:
        history = s["messages"]
        turn = int(str(history[-1].id).removeprefix("h-"))
        answer = AIMessage(id=f"ai-{2 * turn - 1}", content=answers[(turn - 1) % len(answers)])
        plan = trim_history([*history, answer], max_tokens=budget, token_counter=counter)
        assert answer.id not in plan.removed_ids
        return {"messages": [answer, *plan.update().get("messages", [])]}

    return (
        StateGraph(PlainState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)
    )


@dataclass
class Result:
    """Measurements of one variant on one backend."""

    name: str
    sizes: dict[int, int] = field(default_factory=dict)
    load_bytes: dict[int, int] = field(default_factory=dict)
    """Bytes of our rows a fresh saver's ``get_tuple`` read after the turn (STMSaver only)."""
    load_messages: dict[int, int] = field(default_factory=dict)
    """Messages of the checkpoint that load returned."""
    turn_ms: list[float] = field(default_factory=list)
    write_ms: list[float] = field(default_factory=list)
    reload_ms: float = 0.0
    messages: int = 0

    def window(self, turn: int, width: int = 20, series: str = "turn") -> float:
        """Median over the ``width`` turns ending at ``turn`` (robust to a noisy host)."""
        values = self.turn_ms if series == "turn" else self.write_ms
        lo = max(0, turn - width)
        return statistics.median(values[lo:turn])


@dataclass(frozen=True)
class Backend:
    """How to open a saver on one database, measure its size and count a fresh load."""

    name: str
    open: Callable[[], Any]
    size: Callable[[], int]
    open_counted: Callable[[ByteMeter], Any]
    """A context manager: an ``STMSaver`` on a new connection that meters its rows."""


def sqlite_backend(path: Path) -> Backend:
    from langgraph.checkpoint.sqlite import SqliteSaver

    def size() -> int:
        import sqlite3

        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            page = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * page)

    @contextmanager
    def open_counted(meter: ByteMeter) -> Iterator[STMSaver]:
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            yield STMSaver(SqliteSaver(CountingSqlite(conn, meter)))  # type: ignore[arg-type]
        finally:
            conn.close()

    return Backend("sqlite", lambda: SqliteSaver.from_conn_string(str(path)), size, open_counted)


@contextmanager
def postgres_database() -> Iterator[str]:
    import psycopg

    name = f"stm_bench_{uuid.uuid4().hex[:12]}"
    base = ADMIN_URI.rpartition("/")[0]
    with psycopg.connect(ADMIN_URI, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{base}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_backend(uri: str) -> Backend:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    def size() -> int:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("VACUUM")
            row = conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r'"
            ).fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def open_counted(meter: ByteMeter) -> Iterator[STMSaver]:
        from psycopg.rows import dict_row

        # As PostgresSaver.from_conn_string connects, plus the metering cursors.
        with psycopg.Connection.connect(
            uri, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            conn.cursor_factory = counting_cursor_class(meter)
            yield STMSaver(PostgresSaver(conn))

    return Backend("postgres", lambda: PostgresSaver.from_conn_string(uri), size, open_counted)


def counted_load(backend: Backend, config: dict[str, Any]) -> tuple[int, int]:
    """Bytes of our rows (and messages) a fresh saver's ``get_tuple`` of the thread reads."""
    meter = ByteMeter()
    with backend.open_counted(meter) as saver:
        saver.setup()  # idempotent here; what it reads is not the load's
        meter.reset()
        tup = saver.get_tuple(config)
    assert tup is not None, "the thread has no checkpoint"
    return meter.ours, len(tup.checkpoint["channel_values"].get("messages", []))


def postgres_breakdown(uri: str) -> None:
    """Print where a PostgreSQL variant's bytes are: every table after VACUUM and after
    VACUUM FULL (no dead space), and the message payload LangGraph hands the inner saver
    in pending writes and in ``__start__`` input blobs (which no wrapper of ``put`` sees)."""
    import psycopg

    tables = (
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 2 DESC"
    )
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("VACUUM")
        after_vacuum = dict(conn.execute(tables).fetchall())
        conn.execute("VACUUM FULL")
        after_full = dict(conn.execute(tables).fetchall())
        payload = conn.execute(
            "SELECT (SELECT COALESCE(SUM(pg_column_size(blob)), 0) FROM checkpoint_writes "
            "WHERE channel = 'messages'), (SELECT COALESCE(SUM(pg_column_size(blob)), 0) "
            "FROM checkpoint_blobs WHERE channel = '__start__')"
        ).fetchone()
    print(f"  {'table':<24}{'VACUUM':>12}{'VACUUM FULL':>14}")
    for name, size in after_vacuum.items():
        print(f"  {name:<24}{size / 1e6:>10.2f}MB{after_full[name] / 1e6:>12.2f}MB")
    total_full = sum(after_full.values())
    print(f"  {'total':<24}{sum(after_vacuum.values()) / 1e6:>10.2f}MB{total_full / 1e6:>12.2f}MB")
    if payload is not None:
        writes, inputs = int(payload[0]), int(payload[1])
        print(
            f"  message payload in pending writes {writes / 1e6:.2f} MB, in input blobs "
            f"{inputs / 1e6:.2f} MB; VACUUM FULL total if both were gone (the "
            f"references that would replace them not counted): "
            f"{(total_full - writes - inputs) / 1e6:.2f} MB"
        )


class WriteClock:
    """Adds up the wall time spent in a saver's put/put_writes (its *write time*)."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.total = 0.0
        for name in ("put", "put_writes"):
            setattr(saver, name, self._timed(getattr(saver, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.total += time.perf_counter() - start

        timed.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
        return timed


def run_backend(
    backends: dict[str, Backend],
    turns: int,
    checkpoints: Sequence[int],
    load_points: Sequence[int],
    trim_tokens: int = TRIM_TOKENS,
) -> list[Result]:
    """Run every variant in lockstep (turn t of each, then turn t+1), so a noisy host
    slows all of them alike; then reload each from a fresh saver, interleaved too."""
    rng = random.Random(7)
    words = vocabulary(rng)
    human_texts = [text_of(200, rng, words) for _ in range(turns)]
    answers = [text_of(200, rng, words) for _ in range(turns)]
    config = {"configurable": {"thread_id": "bench"}}
    results = {v: Result(f"{b.name}/{v}") for v, b in backends.items()}
    counter = TokenCounter()

    def state_of(variant: str) -> type[Any]:
        return DeltaState if variant == "delta" else PlainState

    def graph_of(variant: str, saver: BaseCheckpointSaver[Any]) -> Any:
        if variant == "stm_trim":
            return build_trimmed(saver, answers, counter, trim_tokens)
        return build(state_of(variant), saver, answers)

    def saver_of(variant: str, inner: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
        if variant == "stm_enc":
            return STMSaver(inner, encryption_key=ENCRYPTION_KEY)
        return STMSaver(inner) if variant in STM_VARIANTS else inner

    with ExitStack() as stack:
        runs = {}
        for variant, backend in backends.items():
            inner = stack.enter_context(backend.open())
            saver = saver_of(variant, inner)
            saver.setup()  # type: ignore[attr-defined]
            runs[variant] = (WriteClock(saver), graph_of(variant, saver))
        for turn in range(1, turns + 1):
            msg = HumanMessage(id=f"h-{turn}", content=human_texts[turn - 1])
            for variant, (clock, graph) in runs.items():
                clock.total = 0.0
                # Each variant starts its turn from a collected heap: a collection that
                # another variant's garbage makes due is not billed to this one.
                gc.collect()
                start = time.perf_counter()
                graph.invoke({"messages": [msg]}, config, durability="sync")
                results[variant].turn_ms.append((time.perf_counter() - start) * 1000)
                results[variant].write_ms.append(clock.total * 1000)
                if turn in checkpoints:
                    results[variant].sizes[turn] = backends[variant].size()
                if turn in load_points and variant in STM_VARIANTS:
                    loaded, messages = counted_load(backends[variant], config)
                    results[variant].load_bytes[turn] = loaded
                    results[variant].load_messages[turn] = messages
    reloads: dict[str, list[float]] = {v: [] for v in backends}
    order = list(backends)
    for rep in range(RELOADS):
        # Rotate which variant goes first, and start each from a collected heap, so a
        # garbage collection triggered by one variant's objects is not billed to another.
        for variant in order[rep % len(order) :] + order[: rep % len(order)]:
            with backends[variant].open() as inner:
                graph = graph_of(variant, saver_of(variant, inner))
                gc.collect()
                start = time.perf_counter()
                values = graph.get_state(config).values
                reloads[variant].append((time.perf_counter() - start) * 1000)
                results[variant].messages = len(values["messages"])
    for variant, times in reloads.items():
        results[variant].reload_ms = statistics.median(times)
    return list(results.values())


def report(results: list[Result], turns: int) -> None:
    half = turns // 2
    early = min(50, turns)
    header = (
        f"{'variant':<18}{'msgs':>6}{f'MB@{half}':>10}{f'MB@{turns}':>10}{'growth':>8}"
        f"{f'wr@{early}':>8}{f'wr@{turns}':>8}{'ratio':>7}"
        f"{f'turn@{early}':>9}{f'turn@{turns}':>9}{'ratio':>7}{'reload':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        w0, w1 = r.window(early, series="write"), r.window(turns, series="write")
        t0, t1 = r.window(early), r.window(turns)
        print(
            f"{r.name:<18}{r.messages:>6}{r.sizes[half] / 1e6:>10.2f}{r.sizes[turns] / 1e6:>10.2f}"
            f"{r.sizes[turns] / r.sizes[half]:>7.2f}x{w0:>8.1f}{w1:>8.1f}{w1 / w0:>6.2f}x"
            f"{t0:>9.1f}{t1:>9.1f}{t1 / t0:>6.2f}x{r.reload_ms:>8.1f}ms"
        )


def report_encryption(results: list[Result], turns: int) -> None:
    """Write and reload time of ``stm_enc`` against ``stm`` (same workload)."""
    by = {r.name: r for r in results}
    early = min(50, turns)
    pairs = [
        (b, by[f"{b}/stm_enc"], by[f"{b}/stm"])
        for b in ("sqlite", "postgres")
        if f"{b}/stm_enc" in by and f"{b}/stm" in by
    ]
    if not pairs:
        return
    print()
    print("encryption at rest: stm_enc (AES-256-GCM) vs stm, same workload (no target)")
    header = (
        f"{'backend':<10}{f'wr@{early} enc':>12}{f'wr@{early}':>9}{'ratio':>7}"
        f"{f'wr@{turns} enc':>12}{f'wr@{turns}':>9}{'ratio':>7}"
        f"{'reload enc':>12}{'reload':>9}{'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for backend, enc, plain in pairs:
        cells = []
        for turn in (early, turns):
            e, p = enc.window(turn, series="write"), plain.window(turn, series="write")
            cells.append(f"{e:>12.1f}{p:>9.1f}{e / p:>6.2f}x")
        reload = f"{enc.reload_ms:>10.1f}ms{plain.reload_ms:>7.1f}ms"
        print(f"{backend:<10}{''.join(cells)}{reload}{enc.reload_ms / plain.reload_ms:>6.2f}x")


def load_points_of(turns: int) -> list[int]:
    """The turns after which load bytes are counted: 50/200/400, and ``turns`` if shorter."""
    return sorted({p for p in LOAD_POINTS if p <= turns} | ({turns} if turns < 400 else set()))


def report_loads(results: list[Result], points: Sequence[int]) -> None:
    """Load bytes per report point of the variants on STMSaver."""
    counted = [r for r in results if r.load_bytes]
    if not counted:
        return
    print()
    print("load bytes: rows of stm_* statements returned to a fresh saver's get_tuple")
    header = (
        f"{'variant':<18}" + "".join(f"{f'@{p}':>12}" for p in points) + f"{'ratio':>8}{'msgs':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in counted:
        first, last = r.load_bytes[points[0]], r.load_bytes[points[-1]]
        print(
            f"{r.name:<18}"
            + "".join(f"{r.load_bytes[p]:>12,}" for p in points)
            + f"{last / first:>7.2f}x{r.load_messages[points[-1]]:>7}"
        )


def targets(results: list[Result], turns: int, points: Sequence[int] = ()) -> None:
    by = {r.name: r for r in results}
    limits = {"sqlite": 8e6, "postgres": 5.5e6}
    half = turns // 2
    early = min(50, turns)
    print()
    for backend, limit in limits.items():
        trimmed = by.get(f"{backend}/stm_trim")
        flat: list[tuple[str, bool]] = []
        if trimmed is not None and points:
            first, last = trimmed.load_bytes[points[0]], trimmed.load_bytes[points[-1]]
            flat.append(
                (
                    f"stm_trim load bytes flat: @{points[-1]} {last:,} B <= {FLAT_LIMIT} x "
                    f"@{points[0]} {first:,} B ({last / first:.2f}x)",
                    last <= FLAT_LIMIT * first,
                )
            )
        stm, plain, delta = (by.get(f"{backend}/{v}") for v in ("stm", "plain", "delta"))
        if stm is None or plain is None or delta is None:
            for text, ok in flat:
                print(f"{backend:<9} {'PASS' if ok else 'FAIL'}  {text}")
            continue
        size = stm.sizes[turns]
        wr_ratio = stm.window(turns, series="write") / stm.window(early, series="write")
        checks = [
            (f"size {size / 1e6:.2f} MB <= {limit / 1e6} MB (400 turns)", size <= limit),
            (
                f"size vs plain: {plain.sizes[turns] / size:.0f}x smaller (>= 50x)",
                plain.sizes[turns] / size >= 50,
            ),
            (
                f"size vs DeltaChannel: {size / delta.sizes[turns]:.2f}x (<= 1.0)",
                size <= delta.sizes[turns],
            ),
            (
                f"growth {half}->{turns}: {size / stm.sizes[half]:.2f}x (<= 2.2x)",
                size / stm.sizes[half] <= 2.2,
            ),
            (
                f"write time per turn @{turns} / @{early}: {wr_ratio:.2f}x (<= 1.3x)",
                wr_ratio <= 1.3,
            ),
            (
                f"(info) whole turn incl. state load @{turns} / @{early}: "
                f"{stm.window(turns) / stm.window(early):.2f}x",
                True,
            ),
            (
                f"reload {stm.reload_ms:.1f} ms vs plain {plain.reload_ms:.1f} ms (<= plain)",
                stm.reload_ms <= plain.reload_ms,
            ),
            *flat,
        ]
        for text, ok in checks:
            print(f"{backend:<9} {'PASS' if ok else 'FAIL'}  {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--variants", default="plain,delta,stm,stm_enc,stm_trim")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="print each PostgreSQL variant's bytes per table (VACUUM and VACUUM FULL)",
    )
    parser.add_argument(
        "--trim-tokens",
        type=int,
        default=TRIM_TOKENS,
        help=f"tokens stm_trim keeps of the history after each turn (default {TRIM_TOKENS})",
    )
    args = parser.parse_args()
    turns = args.turns
    checkpoints = sorted({turns // 2, turns})
    points = load_points_of(turns)
    variants = args.variants.split(",")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        backends = {v: sqlite_backend(Path(tmp) / f"{v}.sqlite") for v in variants}
        results += run_backend(backends, turns, checkpoints, points, args.trim_tokens)
        print("done sqlite", flush=True)
    if not args.skip_postgres:
        with ExitStack() as stack:
            uris = {v: stack.enter_context(postgres_database()) for v in variants}
            results += run_backend(
                {v: postgres_backend(u) for v, u in uris.items()},
                turns,
                checkpoints,
                points,
                args.trim_tokens,
            )
            if args.breakdown:
                for variant, uri in uris.items():
                    print(f"postgres/{variant}:")
                    postgres_breakdown(uri)
        print("done postgres", flush=True)
    print()
    report(results, turns)
    report_loads(results, points)
    report_encryption(results, turns)
    targets(results, turns, points)


if __name__ == "__main__":
    main()
