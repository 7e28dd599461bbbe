"""The end-to-end demonstration (`attest demo`): the one place that shows what the product does.

Runs on embedded defaults: a sample tree written by this module, a local key and a store
under ``state_dir``. Every step calls the same library functions the commands use, and the
demonstration fails (non-zero exit) if any check does not end the way it should: a
tampered copy that verified would be a bug, not a demo.

    >>> run_demo(Path(".attest-state"), print)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .errors import CommonCode, EnvironmentFailure, VerificationError

Say = Callable[[str], None]

SAMPLE = {
    "README.md": b"# sample skill\n\nA tree the demo inventories, signs and freezes.\n",
    "bin/hello": b"#!/usr/bin/env python3\nprint('hello from a frozen image')\n",
    "lib/sample/__init__.py": b"GREETING = 'hello'\n",
    "lib/sample/data.txt": b"some data\n",
}


def write_sample(root: Path) -> Path:
    """(Re)create the sample tree with fixed modes, so its identity is the same everywhere."""
    if root.exists():
        shutil.rmtree(root)
    for rel, data in SAMPLE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o755 if rel.startswith("bin/") else 0o644)
    for d in [root, *{(root / rel).parent for rel in SAMPLE}]:
        os.chmod(d, 0o755)
    return root


def _expect_failure(say: Say, what: str, action: Callable[[], object]) -> None:
    """Run ``action``; it must fail verification. Print the reasons it gave."""
    try:
        action()
    except VerificationError as e:
        say(f"   refused, as it must be ({what}):")
        for f in e.findings[:5]:
            say(f"     {f}")
        return
    raise EnvironmentFailure(CommonCode.INTERNAL, f"{what} was NOT refused; this is a bug")


def step_inventory(state: Path, say: Say) -> None:
    from .inventory import check_tree, inventory_tree

    sample = write_sample(state / "sample")
    say(f"1. inventory the sample tree {sample}")
    inv = inventory_tree(sample)
    say(f"   {len(inv.entries)} entries, identity {inv.identity}")
    copy = state / "sample-tampered"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(sample, copy)
    data = bytearray((copy / "lib/sample/data.txt").read_bytes())
    data[0] ^= 0x01
    (copy / "lib/sample/data.txt").write_bytes(bytes(data))
    say("2. change one byte in a copy and check the copy against the inventory")

    def check() -> None:
        findings = check_tree(copy, inv)
        if findings:
            raise VerificationError(findings=findings)

    _expect_failure(say, "one changed byte", check)


STEPS: list[Callable[[Path, Say], None]] = [step_inventory]


def run_demo(state_dir: Path, say: Say) -> None:
    """Run every step; raises an ``AttestError`` if any step does not end as it must."""
    state = Path(state_dir).absolute()
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    for step in STEPS:
        step(state, say)
    say("demo complete: every check ended as it must.")
