"""An import inside a function says why it is there, on its line or the line just above.

The rule (as python-tuf reads): imports go at the top of the module, except those that buy
measured start-up time on a CLI path or break a real import cycle, and each of those says so
(``# lazy: ...``, or a module's convention comment plus a ``# lazy`` tag).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attest"


def _comment_lines(source: str) -> tuple[set[int], set[int]]:
    """The lines holding a comment, and those holding nothing but one (tokenize's view: a ``#`` in a string is none)."""
    anywhere: set[int] = set()
    alone: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            anywhere.add(tok.start[0])
            if not tok.line[: tok.start[1]].strip():
                alone.add(tok.start[0])
    return anywhere, alone


def function_imports(source: str) -> list[tuple[int, bool]]:
    """Each import statement inside a function (a method, a nested or async one too): its line, and whether it says why.

    It says why when a comment ends its (first) line or stands alone on the line just above it.
    """
    anywhere, alone = _comment_lines(source)
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child.lineno, child.lineno in anywhere or child.lineno - 1 in alone))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(source), False)
    return found


def unexplained_imports(source: str, name: str) -> list[str]:
    """``name:line`` of every import inside a function that does not say why."""
    return [f"{name}:{line}" for line, explained in function_imports(source) if not explained]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\n\ndef f():\n    return os\n", []),  # top level: nothing to say
        ("def f():\n    import os\n    return os\n", ["t.py:2"]),
        ("def f():\n    import os  # lazy: start-up\n    return os\n", []),
        ("def f():\n    # lazy: attest.x imports this module\n    import os\n", []),
        ("def f():\n    # lazy: start-up\n\n    import os\n", ["t.py:4"]),  # the comment is not the line just above
        ("def f():\n    # lazy: start-up\n    import os\n    import sys\n", ["t.py:4"]),  # one comment, one import
        ("def f():\n    x = 1  # a count\n    import os\n", ["t.py:3"]),  # the line above is code, its comment is its own
        ("def f():\n    import os; s = '# not a comment'\n", ["t.py:2"]),
        ("async def f():\n    from os import path\n", ["t.py:2"]),
        ("class C:\n    def m(self):\n        if True:\n            import os\n", ["t.py:4"]),
        ("def f():\n    def g():\n        import os\n    class D:\n        import sys\n", ["t.py:3", "t.py:5"]),
        ("def f():\n    from . import (  # lazy: start-up\n        x,\n    )\n", []),
        ("if True:\n    import os\n", []),  # module level, however indented
    ],
)
def test_the_checker(source: str, expected: list[str]) -> None:
    assert unexplained_imports(source, "t.py") == expected


def test_every_function_import_in_attest_says_why() -> None:
    seen = 0
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        seen += len(function_imports(source))
        offenders += unexplained_imports(source, str(path.relative_to(ROOT)))
    assert seen > 0, "no import inside a function found: the walk is broken"
    assert offenders == [], "imports inside a function with no comment saying why (hoist them, or say `# lazy: ...`):\n" + "\n".join(offenders)
