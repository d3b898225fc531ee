"""The documentation site builds with ``mkdocs build --strict`` and its API reference is complete.

The build runs once per test module, into a temporary directory, exactly as ``make docs``
and CI run it: any warning (a broken link, a docstring griffe cannot read, a
cross-reference to nothing) fails it.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import langgraph_stm

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference"
FEATURE_PAGES = [
    "approval.md",
    "checkpointer.md",
    "context.md",
    "retention.md",
    "safety.md",
    "state.md",
    "tokens.md",
    "trim-and-summarize.md",
]
"""The pages of this package's features, whose examples must run offline."""
DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)
ANCHOR = re.compile(r'id="(langgraph_stm[\w.]*)"')


def public_modules() -> list[str]:
    """``langgraph_stm`` and every module or package under it whose name has no ``_``."""
    names = ["langgraph_stm"]
    for info in pkgutil.walk_packages(langgraph_stm.__path__, "langgraph_stm."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def page_url(page: Path) -> str:
    """The site URL of a docs page, relative to the home page: ``state.md`` -> ``state/``."""
    relative = page.relative_to(DOCS).with_suffix("").as_posix()
    if relative == "index":
        return "."
    return relative.removesuffix("index") if relative.endswith("/index") else relative + "/"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built from this checkout with --strict."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return out


def reference_html(site: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((site / "reference").rglob("*.html")))


class TestStrictBuild:
    """The site builds without a single warning and every page is reachable."""

    def test_every_page_is_in_the_navigation(self, site: Path) -> None:
        """With no explicit nav, the home page's navigation links each docs/**/*.md."""
        links = set(re.findall(r'href="([^"#]*)"', (site / "index.html").read_text()))
        for page in sorted(DOCS.rglob("*.md")):
            assert page_url(page) in links, f"{page.relative_to(REPO)} is not in the navigation"

    def test_the_home_page_is_the_package_overview(self, site: Path) -> None:
        """docs/index.md is the site's front page and links the API reference."""
        home = (site / "index.html").read_text()
        assert 'id="langgraph-stm"' in home
        assert 'href="reference/"' in home


class TestFeaturePages:
    """The code on each feature page runs as written."""

    @pytest.mark.parametrize("page", FEATURE_PAGES)
    def test_python_examples_run(
        self, page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every python block of the page runs (in a fresh namespace, in a tmp dir)."""
        blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)
        assert blocks, f"docs/{page} has no python example"
        monkeypatch.chdir(tmp_path)
        for number, block in enumerate(blocks, 1):
            code = compile(block, f"docs/{page} (python block {number})", "exec")
            exec(code, {"__name__": f"docs_{number}"})


class TestApiReference:
    """Every public name of every public module is in the reference, readable."""

    def test_every_public_module_has_a_directive(self) -> None:
        """Each public module is rendered by a ``::: module`` line in docs/reference/."""
        directives = {
            m for page in REFERENCE.glob("*.md") for m in DIRECTIVE.findall(page.read_text())
        }
        missing = sorted(set(public_modules()) - directives)
        assert not missing, f"add a docs/reference page with '::: <module>' for {missing}"

    def test_every_name_in_a_public_all_has_an_entry(self, site: Path) -> None:
        """``module.name`` is an anchor of the reference for each name of ``__all__``."""
        anchors = set(ANCHOR.findall(reference_html(site)))
        missing = [
            f"{module}.{name}"
            for module in public_modules()
            for name in getattr(importlib.import_module(module), "__all__", [])
            if f"{module}.{name}" not in anchors
        ]
        assert not missing, f"not in the API reference: {missing}"

    def test_doctest_examples_render_as_code(self, site: Path) -> None:
        """``Example:`` doctests become highlighted code, not nested block quotes."""
        html = reference_html(site)
        assert '<span class="gp">&gt;&gt;&gt; </span>' in html
        assert "<blockquote>" not in html

    def test_sphinx_roles_never_show_as_literal_text(self, site: Path) -> None:
        """``:class:`X``` becomes a link (or code text), never the raw role."""
        html = reference_html(site)
        assert not re.search(r":(class|func|meth|mod|data|attr|exc):<code>", html)
        assert 'href="#langgraph_stm.build_context"' in html
