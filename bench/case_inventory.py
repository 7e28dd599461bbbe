"""attest inventory against find | xargs sha256sum / openssl dgst, big-file throughput, start-up."""

from __future__ import annotations

import hashlib
import math
import os
import random
import shutil
import stat
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

from ._harness import BenchArgs, Row, measure_alternating, shell, write_pseudo_random

DESCRIPTION = (
    "`attest inventory T --digest` and `attest check T --inventory I` (the CLI, as a subprocess) vs "
    "`find T -type f -print0 | xargs -0 -P2 -n256 sha256sum` and vs the same with `openssl dgst -sha256`; "
    "multi-GiB files vs two cores' SHA-256 (start-up: case `startup`)"
)

SHA256SUM = 'find "$1" -type f -print0 | xargs -0 -P2 -n256 sha256sum'
OPENSSL = 'find "$1" -type f -print0 | xargs -0 -P2 -n256 openssl dgst -sha256'
OPENSSL_BIG = 'find "$1" -type f -print0 | xargs -0 -P2 -n1 openssl dgst -sha256'


def _base_python() -> str:
    """The real interpreter (not a venv launcher or a pyenv shim)."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _tree_stats(root: Path) -> tuple[int, int, int]:
    files = dirs = size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirs += len(dirnames)
        for name in filenames:
            files += 1
            size += os.lstat(os.path.join(dirpath, name)).st_size
    return files, dirs, size


def _sanitize(root: Path) -> int:
    """Remove what a closed inventory rejects (e.g. case-colliding names in third-party packages)."""
    from attest.inventory import scan_tree

    removed = 0
    for _ in range(5):
        result = scan_tree(root)
        if not result.findings:
            return removed
        for f in result.findings:
            p = root / (f.path or "")
            if p.is_symlink() or p.is_file():
                p.unlink()
            elif p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
            removed += 1
    raise RuntimeError(f"{root} still has findings after sanitizing: {scan_tree(root).findings[:5]}")


def build_runtime(root: Path, target_files: int, target_bytes: int) -> str:
    """Several real virtual environments side by side, plus a stdlib copy, padded to the targets."""
    marker = root.with_suffix(".done")
    if marker.exists():
        return marker.read_text()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    site = Path(sysconfig.get_paths()["purelib"])
    per_venv = sum(len(fs) for _, _, fs in os.walk(site))
    k = max(1, math.ceil(0.6 * target_files / max(per_venv, 1)))
    py = _base_python()
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for i in range(k):
        env = root / f"venv-{i}"
        subprocess.run([py, "-m", "venv", "--copies", "--without-pip", str(env)], check=True)
        lib64 = env / "lib64"
        if lib64.is_symlink():
            lib64.unlink()  # venv always makes this symlink; a closed tree refuses symlinks
        dest = env / "lib" / ver / "site-packages"
        shutil.rmtree(dest)
        shutil.copytree(site, dest, symlinks=True)
    files, _, size = _tree_stats(root)
    # Pad with the interpreter's standard library (what a relocatable runtime ships), file by file.
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    pad_root = root / "runtime" / "lib" / ver
    big_reserve = 0 if size >= target_bytes else 1
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "__pycache__") or dirpath != str(stdlib))
        for name in sorted(filenames):
            if files >= target_files - big_reserve:
                break
            src = Path(dirpath) / name
            st = src.lstat()
            # Keep the mean size on course for both targets: skip files over twice the mean left.
            cap = 2 * (target_bytes - size) / max(1, target_files - files)
            if not stat.S_ISREG(st.st_mode) or st.st_size > cap or size + st.st_size > target_bytes:
                continue
            dst = pad_root / src.relative_to(stdlib)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            files += 1
            size += st.st_size
        if files >= target_files - big_reserve:
            break
    # Fill the remaining bytes with shared-library-sized incompressible files.
    rng = random.Random(20)
    n = 0
    libdir = root / "runtime" / "lib"
    while size < target_bytes * 0.98:
        want = min(target_bytes - size, rng.randint(2 << 20, 24 << 20))
        libdir.mkdir(parents=True, exist_ok=True)
        write_pseudo_random(libdir / f"libpad{n}.so", want, seed=n)
        size += want
        files += 1
        n += 1
    removed = _sanitize(root)
    files, dirs, size = _tree_stats(root)
    desc = (
        f"{k} venvs (python -m venv --copies + site-packages of {site.parent.parent.parent.name or site}) "
        f"+ a stdlib copy + {n} padding .so files; {files} files, {dirs} dirs, {size / 1e6:.0f} MB"
        + (f"; removed {removed} entries a closed tree rejects" if removed else "")
    )
    marker.write_text(desc)
    return desc


def build_small(root: Path, count: int) -> str:
    """``count`` small files (64 B - 4 KiB), 100 per directory, two directory levels."""
    marker = root.with_suffix(".done")
    if marker.exists():
        return marker.read_text()
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(50)
    pool = rng.randbytes(1 << 20)
    size = 0
    for i in range(count):
        d = root / f"g{i // 5000:03d}" / f"d{i // 100:04d}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        n = rng.randint(64, 4096)
        off = rng.randrange(0, len(pool) - n)
        (d / f"f{i:06d}.dat").write_bytes(pool[off : off + n])
        size += n
    desc = f"{count} files, {size / 1e6:.0f} MB, {count // 100} leaf dirs"
    marker.write_text(desc)
    return desc


def build_big(root: Path, count: int, each: int) -> str:
    marker = root.with_suffix(".done")
    if marker.exists():
        return marker.read_text()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for i in range(count):
        write_pseudo_random(root / f"blob{i}.bin", each, seed=100 + i)
    desc = f"{count} files of {each / (1 << 30):.2f} GiB"
    marker.write_text(desc)
    return desc


def _cpu_and_wall(argv: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system, the command and every process it waited for) and wall seconds of one run."""
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = os.times()
    return after.children_user + after.children_system - before.children_user - before.children_system, wall


def _two_core_sha256_seconds(total: int, runs: int) -> float:
    """Seconds two threads (hashlib releases the GIL) need to hash ``total`` bytes in memory."""
    buf = random.Random(7).randbytes(16 << 20)
    per_thread = total // 2

    def one() -> None:
        h = hashlib.sha256()
        done = 0
        view = memoryview(buf)
        while done < per_thread:
            take = min(len(buf), per_thread - done)
            h.update(view[:take])
            done += take

    def both() -> None:
        ts = [threading.Thread(target=one) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    return measure_alternating({"mem": both}, runs)["mem"]


def run(work: Path, args: BenchArgs) -> list[Row]:
    attest = str(args.attest)
    runs = args.runs
    rows: list[Row] = []
    if args.quick:
        rt_files, rt_bytes, small_n, big_n, big_each = 5000, 100_000_000, 10_000, 4, 128 << 20
    else:
        rt_files, rt_bytes, small_n, big_n, big_each = 20_000, 400_000_000, 50_000, 4, 2 << 30

    runtime = work / "runtime"
    print(f"building the runtime-like tree in {runtime} ...", flush=True)
    print("  " + build_runtime(runtime, rt_files, rt_bytes), flush=True)
    small = work / "small"
    print(f"building the small-file tree in {small} ...", flush=True)
    print("  " + build_small(small, small_n), flush=True)

    for label, tree in (("runtime-like tree", runtime), ("small-file tree", small)):
        target_sum = 0.8 if tree is runtime else 1.0
        # The exact verifier: the tree against its inventory, every byte hashed.
        expected = work / f"{tree.name}.inventory.json"
        subprocess.run([attest, "inventory", str(tree), "-o", str(expected)], check=True, stdout=subprocess.DEVNULL)
        contenders = {
            "attest": [attest, "inventory", str(tree), "--digest"],
            "check": [attest, "check", str(tree), "--inventory", str(expected)],
            "sha256sum": shell(SHA256SUM, tree),
            "openssl": shell(OPENSSL, tree),
        }
        m = measure_alternating(contenders, runs)
        print(f"  {label}: medians " + ", ".join(f"{k} {v:.3f} s" for k, v in m.items()), flush=True)
        # On a shared machine the wall ratios move with the load; CPU seconds (what each
        # contender asked of the machine, all its processes together) move much less.
        cpu = {k: _cpu_and_wall(v) for k, v in contenders.items()}
        cpu_note = "one more run each, CPU s / wall s: " + ", ".join(f"{k} {c:.2f} / {w:.2f}" for k, (c, w) in cpu.items())
        cpu_note += f" (load {os.getloadavg()[0]:.1f})"
        print(f"  {label}: {cpu_note}", flush=True)
        rows.append(
            Row(label, "attest inventory --digest vs xargs -P2 sha256sum", m["attest"], m["sha256sum"], target_sum, note=cpu_note)
        )
        rows.append(Row(label, "attest inventory --digest vs xargs -P2 openssl dgst", m["attest"], m["openssl"], 1.0))
        rows.append(
            Row(
                label,
                "attest check --inventory (every byte) vs xargs -P2 sha256sum",
                m["check"],
                m["sha256sum"],
                1.0,
                note=f"of which the CLI's start-up and the inventory's parse are serial; inventory --digest took {m['attest']:.3f} s",
            )
        )

    big = work / "big"
    free = shutil.disk_usage(work).free
    if not big.with_suffix(".done").exists() and free < big_n * big_each + (1 << 30):
        print(f"  big files: skipped, {free / 2**30:.1f} GiB free under {work} and the case writes "
              f"{big_n * big_each / 2**30:.0f} GiB (give --work on a larger filesystem)", flush=True)
        return rows
    print(f"building the big-file tree in {big} ...", flush=True)
    print("  " + build_big(big, big_n, big_each), flush=True)
    total = big_n * big_each
    m = measure_alternating(
        {"attest": [attest, "inventory", str(big), "--digest"], "openssl": shell(OPENSSL_BIG, big)},
        runs,
    )
    mem = _two_core_sha256_seconds(total, runs)
    gbps = total / mem / 1e9
    rows.append(
        Row(
            "big files",
            "attest vs two cores' in-memory SHA-256 (hashlib, 2 threads)",
            m["attest"],
            mem,
            1 / 0.85,
            note=f"attest hashes at {total / m['attest'] / 1e9:.2f} GB/s = {100 * mem / m['attest']:.0f} % of two cores' "
            f"{gbps:.2f} GB/s (target >= 85 %, i.e. ratio <= 1.18)",
        )
    )
    rows.append(Row("big files", "attest vs xargs -P2 -n1 openssl dgst (files)", m["attest"], m["openssl"], 1.25))
    if args.quick:
        shutil.rmtree(big, ignore_errors=True)
        big.with_suffix(".done").unlink(missing_ok=True)

    return rows
