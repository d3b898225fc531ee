"""Read this project's docstrings the way they are written, for the API reference.

The package's docstrings are Google style with two habits griffe's Google parser does
not know: an ``Example:`` section (singular, as Napoleon accepts) holding doctests, and
Sphinx roles such as ``:class:`~langgraph_stm.tools.Offloader```. Left alone, the
doctests render as nested block quotes and the roles as literal text. This extension
rewrites each docstring before it is parsed, only for the documentation build:

- a line ``Example:`` becomes ``Examples:``, so the doctests render as code;
- ``:role:`target``` becomes an optional cross-reference to ``target`` (resolved by
  mkdocs-autorefs when the target is documented, plain code text when it is not): a
  leading ``~`` shows only the last name, and a bare name is looked up in the module
  of the docstring first.

mkdocs.yml loads it through mkdocstrings' ``extensions`` option; nothing here is part
of the package.
"""

from __future__ import annotations

import ast
import html
import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`([^`]+)`")


def _reference(match: re.Match[str], module: str) -> str:
    target = match.group(1).strip()
    shown = target
    if target.startswith("~"):
        target = target[1:]
        shown = target.rsplit(".", 1)[-1]
    if target.startswith("."):
        target = module + target
    elif "." not in target.rstrip("()") or not target.startswith("langgraph_stm"):
        target = f"{module}.{target}"
    identifier = html.escape(target.rstrip("()"), quote=True)
    return (
        f'<autoref identifier="{identifier}" optional><code>{html.escape(shown)}</code></autoref>'
    )


def rewrite(text: str, module: str) -> str:
    """The docstring ``text`` of an object of ``module`` as griffe should read it."""
    text = _EXAMPLE.sub(r"\1Examples:", text)
    return _ROLE.sub(lambda m: _reference(m, module), text)


class ProjectDocstrings(griffe.Extension):
    """Rewrite ``Example:`` sections and Sphinx roles of every loaded docstring."""

    def on_instance(
        self, *, node: ast.AST | griffe.ObjectNode, obj: griffe.Object, **kwargs: Any
    ) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value, obj.module.path)
