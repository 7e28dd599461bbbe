"""attest freeze (copy, seal, verify the frozen copy, publish) vs cp -a + xargs -P2 sha256sum; store reuse."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from ._harness import BenchArgs, Row, measure_alternating, shell
from .case_inventory import _two_core_sha256_seconds, build_runtime

DESCRIPTION = (
    "`attest freeze T --attestation A --policy P --state-dir NEW` (the CLI: verifies the attestation, copies with "
    "copy_file_range, sets the immutable flag, verifies the frozen copy, publishes) vs `cp -a T NEW && find NEW -type f "
    "-print0 | xargs -0 -P2 -n256 sha256sum`; and a second freeze of the same identity (store reuse) vs a fresh freeze"
)

BASELINE = 'cp -a "$1" "$2" && find "$2" -type f -print0 | xargs -0 -P2 -n256 sha256sum'


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv!r} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")


def _remove(path: Path) -> None:
    if path.exists():
        subprocess.run(["chattr", "-R", "-f", "-i", str(path)], check=False, capture_output=True)
        shutil.rmtree(path)


def _erofs_problem(where: Path) -> str | None:
    """Why the erofs backend cannot be measured in ``where`` (not root, no mkfs.erofs, a tmpfs), or None."""
    import tempfile

    from attest.errors import EnvironmentFailure
    from attest.freeze import ErofsBackend

    if os.geteuid() != 0:
        return "needs root"
    scratch = tempfile.mkdtemp(dir=where)
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ErofsBackend().probe(fd, scratch)
    except EnvironmentFailure as e:
        return f"{e.code}: {e.detail}"
    finally:
        os.close(fd)
        _remove(Path(scratch))
    return None


def _erofs_rows(out: Path, runtime: Path, freeze_cmd: Callable[[Path], list[str]], baseline: Callable[[], None],
                counter: Iterator[int], runs: int) -> list[Row]:
    """The erofs backend's fresh freeze (CLI) against the same anchor, and its verified reuse (library), when it can run here."""
    problem = _erofs_problem(out)
    if problem is not None:
        print(f"  erofs backend not measured: {problem}", flush=True)
        return []
    from attest.freeze import freeze_tree
    from attest.inventory import inventory_tree

    def fresh() -> None:
        _run([*freeze_cmd(out / f"state-{next(counter)}"), "--backend", "erofs"])

    try:
        m = measure_alternating({"attest": fresh, "baseline": baseline}, runs)
        expected = inventory_tree(runtime)
        state = out / "state-erofs-reused"
        freeze_tree(runtime, expected, state, backend="erofs")

        def reuse() -> None:
            assert freeze_tree(runtime, expected, state, backend="erofs").reused

        def lib_fresh() -> None:
            freeze_tree(runtime, expected, out / f"state-{next(counter)}", backend="erofs")

        lib = measure_alternating({"reuse": reuse, "fresh": lib_fresh}, runs)
    finally:
        for p in out.iterdir():
            _remove(p)
    return [
        Row("runtime-like tree", "attest freeze --backend erofs (copy, mkfs.erofs, seal, check through the mount) vs cp -a + xargs -P2 sha256sum",
            m["attest"], m["baseline"], 0.7),
        Row("runtime-like tree", "freeze_tree erofs: store reuse (image hash + every entry through a mount) vs fresh erofs freeze",
            lib["reuse"], lib["fresh"], 0.15, note=f"reuse takes {lib['reuse']:.3f} s per use (the issue's target: 0.1 s)"),
    ]


def run(work: Path, args: BenchArgs) -> list[Row]:
    attest = str(args.attest)
    runs = args.runs
    rt_files, rt_bytes = (5000, 100_000_000) if args.quick else (20_000, 400_000_000)
    runtime = work / "runtime"
    print(f"building the runtime-like tree in {runtime} ...", flush=True)
    print("  " + build_runtime(runtime, rt_files, rt_bytes), flush=True)

    keys = work / "keys"
    _remove(keys)
    keys.mkdir()
    _run([attest, "keygen", "-o", str(keys / "bench.pem")])
    policy = keys / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "bench.pub.pem"\n')
    attestation = keys / "runtime.att.json"
    _run([attest, "attest", str(runtime), "--key", str(keys / "bench.pem"), "-o", str(attestation)])

    out = work / "out"
    _remove(out)
    out.mkdir(mode=0o700)
    counter = itertools.count()

    def freeze_cmd(state: Path) -> list[str]:
        return [attest, "freeze", str(runtime), "--attestation", str(attestation), "--policy", str(policy), "--state-dir", str(state), "--json"]

    def fresh() -> None:
        _run(freeze_cmd(out / f"state-{next(counter)}"))

    def baseline() -> None:
        _run(shell(BASELINE, runtime, out / f"copy-{next(counter)}"))

    try:
        m = measure_alternating({"attest": fresh, "baseline": baseline}, runs)
    finally:
        for p in out.iterdir():
            _remove(p)
    rows = [Row("runtime-like tree", "attest freeze (copy+seal+verify) vs cp -a + xargs -P2 sha256sum", m["attest"], m["baseline"], 0.7)]
    rows += _erofs_rows(out, runtime, freeze_cmd, baseline, counter, runs)

    # Reuse: one store, frozen once; every reuse confirms the seal, verifies every byte against the
    # stored inventory and confirms the seal again. Compared in the library (same terms on both sides: the CLI's interpreter start-up,
    # signature check and inventory parse cost the same for both and are reported in a note).
    from attest.freeze import freeze_tree
    from attest.inventory import inventory_tree

    expected = inventory_tree(runtime)
    reused_state = out / "state-reused"
    freeze_tree(runtime, expected, reused_state)

    def lib_reuse() -> None:
        assert freeze_tree(runtime, expected, reused_state).reused

    def lib_fresh() -> None:
        freeze_tree(runtime, expected, out / f"state-{next(counter)}")

    try:
        lib = measure_alternating({"reuse": lib_reuse, "fresh": lib_fresh}, runs)
        cli = measure_alternating({"reuse": freeze_cmd(reused_state)}, runs)
    finally:
        for p in out.iterdir():
            _remove(p)
    n_entries = sum(len(d) + len(f) for _, d, f in os.walk(runtime))
    total = sum(e.size or 0 for e in expected.entries)
    mem = _two_core_sha256_seconds(total, runs)
    rows.append(
        Row(
            "runtime-like tree",
            "freeze_tree: store reuse, every byte verified, vs fresh freeze",
            lib["reuse"],
            lib["fresh"],
            0.15,
            note=f"{n_entries} entries; `attest freeze` of a stored identity (CLI: interpreter start-up, policy, "
            f"signature check, inventory parse, reuse check) takes {cli['reuse']:.2f} s = "
            f"{cli['reuse'] / lib['fresh']:.2f} of a fresh freeze",
        )
    )
    rows.append(
        Row(
            "runtime-like tree",
            "freeze_tree: store reuse, every byte verified, vs two cores' in-memory SHA-256 of the same bytes",
            lib["reuse"],
            mem,
            1.5,
            note=f"{total / 1e6:.0f} MB in {n_entries} entries: two hashlib threads take {mem:.3f} s over the bytes alone; "
            "reuse adds the seal check before and after, and the walk's per-entry work (open, fstat, read, fstat per file)",
        )
    )
    return rows
