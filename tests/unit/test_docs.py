"""The repository's own documentation is the reference that code, tests and README cite.

- nothing outside ``docs/`` points at a design note kept outside the repository;
- every "invariant N" cited in the package, tests, benchmarks, notebooks, README and
  docs has its heading in ``docs/architecture.md``;
- relative links in ``README.md`` and ``docs/*.md`` resolve (files, and heading anchors
  of markdown files), and repository paths quoted in ``docs/*.md`` exist.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
ARCHITECTURE = DOCS / "architecture.md"

SKIP_DIRS = frozenset(
    {
        ".git",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        ".ipynb_checkpoints",
        "build",
        "dist",
        "node_modules",
    }
)
TEXT_SUFFIXES = frozenset({".py", ".md", ".ipynb", ".toml"})

# Built from parts so that this file does not match its own patterns.
OUTSIDE_REFERENCE = re.compile(re.escape("DESIGN" + ".md") + "|" + r"\b" + "shared" + "/")
CITATION = re.compile(
    r"\binvariants?\s+(\d+(?:\s*(?:,|-|–|\band\b|\bor\b|&)\s*\d+)*)", re.IGNORECASE
)
INVARIANT_HEADING = re.compile(r"^###\s+Invariant\s+(\d+):\s+\S", re.MULTILINE)
INLINE_LINK = re.compile(
    r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
REPO_PATH = re.compile(r"`((?:langgraph_stm|tests|benchmarks|notebooks|docs)/[\w./-]*)`")


# -- helpers -------------------------------------------------------------------------------
def walk(root: Path) -> Iterator[Path]:
    """Every file under ``root``, skipping virtualenvs, VCS data and caches."""
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            yield Path(directory) / name


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def without_fences(text: str) -> str:
    """``text`` with fenced code blocks blanked (line numbers are kept)."""
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        marker = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence is None and marker:
            fence = marker.group(1)[0] * 3
            out.append("")
        elif fence is not None:
            if line.lstrip().startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def without_code(text: str) -> str:
    """``text`` with fenced blocks and inline code spans blanked (positions are kept)."""
    return re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group()), without_fences(text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors a markdown file defines: its headings (GitHub style) and HTML anchors."""
    text = read(path)
    found: set[str] = set(HTML_ANCHOR.findall(text))
    counts: dict[str, int] = {}
    for line in without_fences(text).split("\n"):
        heading = ATX_HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def numbers(cited: str) -> list[int]:
    """The invariant numbers of one citation: ``"1-3, 5 and 8"`` -> ``[1, 2, 3, 5, 8]``."""
    result: list[int] = []
    for part in re.split(r"\s*(?:,|\band\b|\bor\b|&)\s*", cited, flags=re.IGNORECASE):
        bounds = [int(b) for b in re.split(r"\s*[-–]\s*", part.strip()) if b]
        if len(bounds) == 2:
            result.extend(range(bounds[0], bounds[1] + 1))
        else:
            result.extend(bounds)
    return result


def invariant_headings() -> list[int]:
    return [int(n) for n in INVARIANT_HEADING.findall(read(ARCHITECTURE))]


def markdown_docs() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


# -- tests ---------------------------------------------------------------------------------
class TestNoOutsideDesignNote:
    """The repository cites its own docs, never a file kept outside it."""

    def test_no_file_outside_docs_cites_an_outside_design_note(self) -> None:
        """*.py, *.md, *.ipynb, *.toml and .ci/* files outside docs/ name no outside note."""
        hits: list[str] = []
        for path in walk(REPO):
            parts = path.relative_to(REPO).parts
            if parts[0] == "docs":
                continue
            if path.suffix not in TEXT_SUFFIXES and parts[0] != ".ci":
                continue
            text = read(path)
            for match in OUTSIDE_REFERENCE.finditer(text):
                line = text.split("\n")[line_of(text, match.start()) - 1].strip()
                hits.append(f"{rel(path)}:{line_of(text, match.start())}: {line[:120]}")
        assert not hits, "cite docs/architecture.md instead:\n" + "\n".join(hits)


class TestInvariantCitations:
    """Every "invariant N" in the project has its heading in docs/architecture.md."""

    def test_headings_are_numbered_one_to_n_without_gaps(self) -> None:
        """``### Invariant N: name`` headings, N = 1, 2, ... in order, at least eight."""
        found = invariant_headings()
        assert len(found) >= 8, found
        assert found == list(range(1, len(found) + 1)), found

    def test_every_cited_invariant_has_a_heading(self) -> None:
        """Citations in the package, tests, benchmarks, notebooks, README and docs."""
        defined = set(invariant_headings())
        sources = [
            path
            for root in ("langgraph_stm", "tests", "benchmarks", "notebooks", "docs")
            if (REPO / root).is_dir()
            for path in walk(REPO / root)
            if path.suffix in TEXT_SUFFIXES
        ]
        sources.append(REPO / "README.md")
        cited = 0
        unknown: list[str] = []
        for path in sources:
            text = read(path)
            for match in CITATION.finditer(text):
                for n in numbers(match.group(1)):
                    cited += 1
                    if n not in defined:
                        where = f"{rel(path)}:{line_of(text, match.start())}"
                        unknown.append(f"{where}: invariant {n} ({match.group(0)!r})")
        assert cited, "no invariant citation found: has the citation pattern changed?"
        assert not unknown, "cited invariants without a heading:\n" + "\n".join(unknown)

    def test_citation_parsing(self) -> None:
        """Ranges and lists are expanded; a plain number is itself."""
        assert numbers("1-3, 5, 6 and 8") == [1, 2, 3, 5, 6, 8]
        assert numbers("4") == [4]
        match = CITATION.search("Invariants 1-5 and 8 of the docs")
        assert match is not None
        assert numbers(match.group(1)) == [1, 2, 3, 4, 5, 8]


class TestMarkdownLinks:
    """Relative links of README.md and docs/*.md point at files and anchors that exist."""

    def test_every_relative_link_resolves(self) -> None:
        """Files exist inside the repository; ``#fragment`` names a heading of the target."""
        broken: list[str] = []
        for source in markdown_docs():
            if not source.is_file():
                continue
            text = without_code(read(source))
            targets = [
                (m.start(), m.group(1))
                for pattern in (INLINE_LINK, REFERENCE_LINK)
                for m in pattern.finditer(text)
            ]
            for index, target in targets:
                if SCHEME.match(target):
                    continue
                where = f"{rel(source)}:{line_of(text, index)}: {target}"
                path_part, _, fragment = target.partition("#")
                if path_part.startswith("/"):
                    resolved = (REPO / path_part.lstrip("/")).resolve()
                elif path_part:
                    resolved = (source.parent / path_part).resolve()
                else:
                    resolved = source
                if not resolved.is_relative_to(REPO):
                    broken.append(f"{where} (outside the repository)")
                elif not resolved.exists():
                    broken.append(f"{where} (no such file)")
                elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                    broken.append(f"{where} (no such heading)")
        assert not broken, "broken links:\n" + "\n".join(broken)

    def test_repository_paths_quoted_in_docs_exist(self) -> None:
        """A `tests/...` or `langgraph_stm/...` path quoted in docs/*.md names a real file."""
        missing: list[str] = []
        for source in sorted(DOCS.glob("*.md")):
            text = read(source)
            for match in REPO_PATH.finditer(text):
                if not (REPO / match.group(1)).exists():
                    missing.append(f"{rel(source)}:{line_of(text, match.start())}: {match[1]}")
        assert not missing, "paths that do not exist:\n" + "\n".join(missing)

    def test_slugs_follow_github(self) -> None:
        """Headings become the anchors GitHub renders."""
        assert slug("Invariant 4: idempotent on resume") == "invariant-4-idempotent-on-resume"
        assert slug("Checkpointer (`STMSaver`)") == "checkpointer-stmsaver"
        assert slug("Reclaim: delete, prune, vacuum") == "reclaim-delete-prune-vacuum"
