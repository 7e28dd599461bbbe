"""`attest inventory` and `attest check`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .._plural import count
from ..errors import VerificationError
from ._app import JsonOption, argument, checked_output, flag, option, print_json, progress_bar
from ._streams import write_stdout

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.inventory +16 ms, attest._fs (its tempfile) +3 ms, over the app's own 60 ms (-X importtime after
# build_app(), median of 5).


def register(app: typer.Typer) -> None:
    app.command("inventory")(inventory)
    app.command("check")(check)


def inventory(
    path: Path = argument(metavar="PATH", help="Root of the tree to inventory."),
    output: Optional[Path] = option(None, "-o", "--output", metavar="FILE", help="Write the inventory here (atomically).", callback=checked_output),
    digest: bool = flag("--digest", help="Print only the identity, sha256:<hex>."),
    ignore: list[str] = option([], "--ignore", metavar="PATTERN", help="gitignore-style pattern; recorded in the inventory. Repeatable."),
    json_mode: bool = JsonOption,
) -> None:
    """Write the closed inventory of the tree at PATH (RFC 8785 JSON, one line)."""
    from .._fs import write_atomic  # lazy
    from ..inventory import inventory_tree  # lazy

    with progress_bar("hashing", json_mode) as progress:
        inv = inventory_tree(path, ignore=ignore, progress=progress)
    if output is not None:
        write_atomic(output, inv.canonical + b"\n", what="inventory")
    summary = {"ok": True, "identity": inv.identity, "entries": len(inv.entries), "files": inv.file_count, "bytes": inv.total_size}
    if json_mode:
        if output is None and not digest:
            summary["inventory"] = inv.to_json()
        if output is not None:
            summary["output"] = str(output)
        print_json(summary)
    elif digest:
        print(inv.identity)
    elif output is None:
        write_stdout(inv.canonical + b"\n")  # all of it or an error: a pipe's short write is not success
    else:
        print(f"wrote {output}: {count(len(inv.entries), 'entry')}, {count(inv.file_count, 'file')}, {count(inv.total_size, 'byte')}, identity {inv.identity}")


def check(
    path: Path = argument(metavar="PATH", help="Root of the tree to check."),
    inventory_file: Path = option(..., "--inventory", metavar="FILE", help="The expected inventory."),
    json_mode: bool = JsonOption,
) -> None:
    """Exit 0 only if the tree at PATH matches the inventory exactly; else list every difference."""
    from .._fs import read_bounded  # lazy
    from ..inventory import MAX_INVENTORY_BYTES, Inventory, check_tree  # lazy

    expected = Inventory.from_bytes(read_bounded(inventory_file, what="inventory", max_bytes=MAX_INVENTORY_BYTES))
    with progress_bar("checking", json_mode) as progress:
        findings = check_tree(path, expected, progress=progress)
    if findings:
        raise VerificationError(findings=findings)
    if json_mode:
        print_json({"ok": True, "identity": expected.identity, "entries": len(expected.entries)})
    else:
        print(f"OK: {path} matches {expected.identity} ({count(len(expected.entries), 'entry')})")


__all__ = ["register"]
