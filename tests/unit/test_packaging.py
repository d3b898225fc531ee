"""Packaging: every import is a declared dependency, and the version lives in one place."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import langgraph_stm
from langgraph_stm import _version

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "langgraph_stm"
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

DISTRIBUTIONS = {
    "aiosqlite": "aiosqlite",
    "cryptography": "cryptography",
    "langchain": "langchain",
    "langchain_core": "langchain-core",
    "langgraph": "langgraph",
    "langgraph.checkpoint": "langgraph-checkpoint",
    "langgraph.checkpoint.postgres": "langgraph-checkpoint-postgres",
    "langgraph.checkpoint.sqlite": "langgraph-checkpoint-sqlite",
    "langgraph.prebuilt": "langgraph-prebuilt",
    "langgraph.store": "langgraph-checkpoint",  # BaseStore ships with the checkpoint base
    "langgraph.store.sqlite": "langgraph-checkpoint-sqlite",
    "psycopg": "psycopg",
    "psycopg_pool": "psycopg-pool",
    "pydantic": "pydantic",
    "rich": "rich",
    "tiktoken": "tiktoken",
    "typing_extensions": "typing-extensions",
}
"""Import name -> the distribution that installs it; the longest dotted prefix wins,
since ``langgraph`` is a namespace several distributions share."""

GATED = {
    "aiosqlite": "sqlite",
    "cryptography": "encryption",
    "langchain": "agents",
    "langgraph-checkpoint-postgres": "postgres",
    "langgraph-checkpoint-sqlite": "sqlite",
    "psycopg": "postgres",
    "psycopg-pool": "postgres",
}
"""Distributions the package imports only behind an extra -> that extra."""

VIA_EXTRA = {"psycopg-pool": ("psycopg", "pool")}
"""Distributions declared as the extra of another requirement (``psycopg[pool]``)."""


def third_party_imports() -> dict[str, set[str]]:
    """Every non-stdlib module ``langgraph_stm/`` imports (at any level) -> the files."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.partition(".")[0]
                if top != "langgraph_stm" and top not in sys.stdlib_module_names:
                    found.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    return found


def distribution_of(module: str) -> str | None:
    """The distribution installing ``module``, by the longest prefix in DISTRIBUTIONS."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = DISTRIBUTIONS.get(".".join(parts[:end]))
        if name is not None:
            return name
    return None


def declared(requirements: list[str]) -> set[str]:
    """Canonical names of the distributions ``requirements`` install directly."""
    names: set[str] = set()
    for line in requirements:
        requirement = Requirement(line)
        names.add(canonicalize_name(requirement.name))
        for provided, (parent, extra) in VIA_EXTRA.items():
            if canonicalize_name(requirement.name) == parent and extra in requirement.extras:
                names.add(provided)
    return names


@cache
def files_of(distribution: str) -> frozenset[Path]:
    """The absolute paths of the files an installed distribution owns."""
    dist = importlib.metadata.distribution(distribution)
    return frozenset(Path(str(dist.locate_file(f))).resolve() for f in dist.files or ())


class TestDeclaredDependencies:
    """What the package imports is what pyproject.toml declares."""

    def test_the_scan_sees_the_known_third_party_imports(self) -> None:
        """The import scan finds imports at module level and inside functions alike."""
        tops = {module.partition(".")[0] for module in third_party_imports()}
        assert {"langchain_core", "langgraph", "pydantic", "tiktoken", "typing_extensions"} <= tops
        assert {"psycopg", "psycopg_pool"} <= tops  # imported lazily, behind the extra

    def test_every_third_party_import_is_declared(self) -> None:
        """Each imported distribution is a dependency, or in the extra that gates it."""
        project = PYPROJECT["project"]
        core = declared(project["dependencies"])
        extras = {name: declared(lines) for name, lines in project["optional-dependencies"].items()}
        problems = []
        for module, files in sorted(third_party_imports().items()):
            distribution = distribution_of(module)
            if distribution is None:
                problems.append(f"{module} ({sorted(files)}): add it to DISTRIBUTIONS")
                continue
            extra = GATED.get(distribution)
            where = core if extra is None else extras.get(extra, set())
            if canonicalize_name(distribution) not in where:
                section = "dependencies" if extra is None else f"optional-dependencies.{extra}"
                problems.append(f"{module} ({sorted(files)}): declare {distribution} in {section}")
        assert problems == []

    def test_distribution_table_matches_installed_files(self) -> None:
        """Each imported module's file belongs to the distribution DISTRIBUTIONS names."""
        wrong = []
        for module in sorted(third_party_imports()):
            distribution = distribution_of(module)
            assert distribution is not None, module
            spec = importlib.util.find_spec(module)
            assert spec is not None, module
            assert spec.origin is not None, module
            if Path(spec.origin).resolve() not in files_of(distribution):
                wrong.append((module, distribution, spec.origin))
        assert wrong == []

    @pytest.mark.parametrize(("provided", "via"), sorted(VIA_EXTRA.items()))
    def test_extra_of_a_requirement_installs_what_it_is_counted_for(
        self, provided: str, via: tuple[str, str]
    ) -> None:
        """``psycopg[pool]`` really requires psycopg-pool, per psycopg's own metadata."""
        parent, extra = via
        requires = [Requirement(line) for line in importlib.metadata.requires(parent) or ()]
        assert any(
            canonicalize_name(r.name) == provided
            and r.marker is not None
            and r.marker.evaluate({"extra": extra})
            for r in requires
        )

    def test_every_gate_is_an_extra_of_the_project(self) -> None:
        """The extras GATED names exist in pyproject.toml."""
        assert set(GATED.values()) <= set(PYPROJECT["project"]["optional-dependencies"])


class TestVersion:
    """The version is written once, in langgraph_stm/_version.py."""

    def test_installed_metadata_version_is_the_version_module(self) -> None:
        """importlib.metadata reports the version _version.py holds."""
        assert importlib.metadata.version("langgraph-stm") == _version.__version__

    def test_pyproject_reads_the_version_from_the_version_module(self) -> None:
        """pyproject.toml has no version of its own: hatch reads _version.py."""
        project = PYPROJECT["project"]
        assert "version" not in project
        assert "version" in project["dynamic"]
        path = PYPROJECT["tool"]["hatch"]["version"]["path"]
        assert (ROOT / path).resolve() == Path(_version.__file__).resolve()

    def test_package_exposes_the_version_module_version(self) -> None:
        """``langgraph_stm.__version__`` is the one from _version.py."""
        assert langgraph_stm.__version__ == _version.__version__
