"""docs/tutorial.md, run as written: every ```sh block in order, in one bash session, as a new user would.

The session starts where the tutorial says to start, in this checkout (its first block sets
``$A`` to it and moves to ``$T``, a work directory under a fresh ``HOME`` in tmp_path), with a
plain ``PATH`` whose ``python3`` is the interpreter that made this checkout's ``.venv`` (so that
``bootstrap.py --list`` in the first block finds it current). Every block must exit 0, each in
turn; the blocks that show a refusal assert it themselves. The run does one real promotion (the
runtime built twice by the release engineer, once by the rebuilder), so it is slow: marked
``slow``, and ``registry`` for ``attest fetch``.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.build import registry_reachable, sandbox_available

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
MARK = "::tutorial-block::"


def sh_blocks(text: str) -> list[str]:
    """The tutorial's ```sh blocks, in order (```text blocks are output shown, never run)."""
    return [m.group(1) for m in re.finditer(r"^```sh\n(.*?)^```[ \t]*$", text, re.M | re.S)]



def _base_python() -> Path:
    """The interpreter this checkout's .venv was made with (the user's ``python3``)."""
    return Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))


def test_the_tutorial_blocks_are_shell_and_use_only_what_it_sets() -> None:
    """Every command of the tutorial is in a ```sh block, and the blocks name the variables the tutorial sets."""
    text = TUTORIAL.read_text()
    blocks = sh_blocks(text)
    assert len(blocks) >= 10
    openings = re.findall(r"^```(.*)$", text, re.M)[::2]  # fences alternate: an opening, then its closing
    assert set(openings) == {"sh", "text"}, openings  # commands in sh blocks, output in text blocks, nothing else
    assert 'export A="$PWD"' in blocks[0] and 'cd "$T"' in blocks[0]
    assert "ATTEST_BACKEND=readonly" in blocks[0]  # what an ordinary user uses, said where it is chosen


@pytest.mark.slow
@pytest.mark.registry
@pytest.mark.skipif(not registry_reachable(), reason="the package registry is unreachable (attest fetch)")
@pytest.mark.skipif(not sandbox_available(), reason="the build sandbox cannot be established here")
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    blocks = sh_blocks(TUTORIAL.read_text())
    python = _base_python()
    stamp = ROOT / ".venv" / ".attest-bootstrap"  # bootstrap.py's STAMP
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()
    # The first block runs bootstrap.py, which would remake a stale .venv (the one this test runs from).
    assert _stamp(stamp) == wanted, f"{ROOT / '.venv'} is not current for {python}: run `python3 bootstrap.py --list` first"
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    marks = [*map(str, range(len(blocks))), "done"]
    # Each block's start is marked on both streams, so that what a block printed can be told from the others'.
    script = "set -euo pipefail\n" + "".join(f"printf '%s %s\\n' '{MARK} {m}' \"$EPOCHREALTIME\"; printf '%s\\n' '{MARK} {m}' >&2\n{block}"
                                              for m, block in zip(marks, [*blocks, ""], strict=True))
    env = {"HOME": str(home), "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C.UTF-8", "TERM": "dumb"}
    started = time.monotonic()
    try:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False)
    finally:
        if os.geteuid() == 0:  # a failed run may leave immutable images behind
            subprocess.run(["chattr", "-R", "-f", "-i", str(tmp_path)], check=False, capture_output=True)
    elapsed = time.monotonic() - started
    out, err = _by_block(proc.stdout), _by_block(proc.stderr)
    ran = list(out)
    failed = f"block {ran[-1] if ran else 0} failed (exit {proc.returncode}):\n{blocks[int(ran[-1])] if ran and ran[-1].isdigit() else ''}"
    assert proc.returncode == 0, f"{failed}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    assert ran == marks and list(err) == marks, (ran, list(err))
    stdout = proc.stdout
    # The promotion happened once, with the rebuilder's result; the refusal before it built nothing.
    refusal = next(k for k, v in err.items() if "REBUILDERS_THRESHOLD_NOT_MET" in v)
    assert "0 of the 1 required independent rebuilder gave a result of this candidate" in err[refusal]
    assert "attest promote" in blocks[int(refusal)] and "--rebuild-result" not in blocks[int(refusal)]
    assert re.search(r"^PROMOTED [0-9a-f]{40} into \S+/deployment/pins\.toml$", stdout, re.M), stdout
    assert re.search(r"^  rebuilders  1 of 1 agree \(threshold 1\): key:sha256:", stdout, re.M), stdout
    # The stand-in's limited record is refused; the example reviewer's complete record is authorized, for the exact head.
    assert re.search(r"^SERIALIZED review [0-9a-f]{32}: LIMITED for head [0-9a-f]{40}", stdout, re.M), stdout
    limited = next(k for k, v in err.items() if "MERGE_REVIEW_NOT_COMPLETE" in v)
    assert re.search(r"^NOT AUTHORIZED: review [0-9a-f]{32} \(limited\) for head [0-9a-f]{40}$", err[limited], re.M), err[limited]
    authorized = [m.group(1) for m in re.finditer(r"^AUTHORIZED: review [0-9a-f]{32} \(complete\) for head ([0-9a-f]{40})$", stdout, re.M)]
    assert len(authorized) == 1, stdout
    gate = next(k for k, v in out.items() if "AUTHORIZED: review" in v)
    assert f"MERGE_AUTHORIZED: a complete review with no blocking finding and every required check (test) succeeded, for the exact head " \
           f"{authorized[0]}" in out[gate]
    assert "attest merge-gate check" in blocks[int(gate)] and "git -C widgets merge" in blocks[int(gate)]
    # The last block cleaned up after itself.
    assert not (home / "attest-tutorial").exists()
    print(f"the tutorial ran in {elapsed:.0f} s ({len(blocks)} blocks; seconds per block: {_durations(stdout)})")


def _by_block(text: str) -> dict[str, str]:
    """What each block printed on one stream, by its mark (``0``, ``1``, ..., ``done``), in order."""
    parts = text.split(f"{MARK} ")[1:]
    return {part.split("\n", 1)[0].split(" ")[0]: part.partition("\n")[2] for part in parts}


def _durations(stdout: str) -> dict[str, float]:
    """How long each block ran, from the start marks' times (bash's $EPOCHREALTIME)."""
    starts = [(m.group(1), float(m.group(2))) for m in re.finditer(rf"^{MARK} (\S+) (\d+\.\d+)$", stdout, re.M)]
    return {mark: round(t2 - t1, 1) for (mark, t1), (_, t2) in itertools.pairwise(starts)}


def _stamp(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None
