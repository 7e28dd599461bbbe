"""`attest policy generate` and `attest policy check` (the managed check; see docs/policy.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from .._plural import count
from ..errors import InputError
from ._app import JsonOption, new_group, option, print_json

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.policy +71 ms, over the app's own 60 ms (-X importtime after build_app(), median of 5).

RootOption = option(Path("."), "--root", metavar="DIR", help="The repository root (default: the current directory). Nothing outside it is read.")


def register(app: typer.Typer) -> None:
    sub = new_group("policy", "The repository's review authority: .agent-policy.yml, .agent-policy.lock and their generated outputs.")
    sub.command("generate")(generate)
    sub.command("check")(check)
    app.add_typer(sub, name="policy")


def generate(root: Path = RootOption, json_mode: bool = JsonOption) -> None:
    """Render every enabled output and the pr-review Skill; write them, then the lock. Removes only pristine stale outputs."""
    from ..policy import generate_policy  # lazy

    with _root_hint():
        report = generate_policy(root)
    if json_mode:
        print_json(report.to_json())
        return
    for path in report.written:
        print(f"wrote {path}")
    for path in report.removed:
        print(f"removed {path}")
    lock = "wrote" if report.lock_written else "unchanged:"
    print(f"{lock} .agent-policy.lock; {count(len(report.check.outputs), 'output')}, {len(report.unchanged)} already current; check passed")


def check(root: Path = RootOption, json_mode: bool = JsonOption) -> None:
    """Exit 0 only if config, lock, inputs and every generated output reproduce byte for byte."""
    from ..policy import check_policy  # lazy

    with _root_hint():
        report = check_policy(root)
    if json_mode:
        print_json(report.to_json())
        return
    print(f"OK: {report.to_json()['root']}: {count(len(report.inputs), 'input')} and {count(len(report.outputs), 'output')} reproduce byte for byte "
          f"(toolchain {report.lock.toolchain.revision})")


@contextmanager
def _root_hint() -> Iterator[None]:
    """A missing ``.agent-policy.yml`` says how to point the command at the repository (the library knows no options)."""
    from ..policy import PolicyCode  # lazy

    try:
        yield
    except InputError as e:
        if e.code != PolicyCode.CONFIG_MISSING:
            raise
        raise InputError(e.code, f"{e.detail}: run it in the repository's root, or name the root with --root DIR "
                                 "(docs/formats.md shows a whole .agent-policy.yml)", e.path) from None


__all__ = ["register"]
