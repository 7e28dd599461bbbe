"""The CLI and the demo use each layer's public surface only: no `attest.<layer>._private` import."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "attest"
LAYERS = {"inventory", "git", "attestation", "freeze", "builder", "policy", "review"}


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts and parts[0] == "attest":
                parts = parts[1:]
            if parts and parts[0] in LAYERS and any(p.startswith("_") for p in parts[1:]):
                found.append(f"{path.name}:{node.lineno}: from {'.' * node.level}{node.module}")
    return found


def test_cli_and_demo_import_no_private_module_of_a_layer() -> None:
    files = [*sorted((PACKAGE / "cli").glob("*.py")), PACKAGE / "demo.py"]
    offenders = [hit for f in files for hit in _private_imports(f)]
    assert offenders == [], offenders
