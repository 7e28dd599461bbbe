"""`just verify` with a no-op reviewer, every image already in the store, against its 2 s target."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._harness import BenchArgs, Row, measure_alternating
from .case_bootstrap import ROOT, _discard, _set_up

DESCRIPTION = (
    "the real `just verify REPO --identity FILE` (bootstrap, review start, review exec, review recheck, review serialize, "
    "each the venv's `attest` as its own process) with a no-op reviewer (`echo` of a fixed result), every image already "
    "in the store (each still verified), on the bootstrap case's promoted deployment and consumer: the total against the "
    "2 s target, the five commands one by one as the recipe runs them, and the CLI's start-up alone; with "
    "ATTEST_BENCH_AGAINST=REV, the same runs alternated with the attest/ of REV (the baseline column)"
)

TARGET_S = 2.0
#: A reviewer that costs nothing: a valid, honest result (nothing analysed), no Python, no reading.
NO_OP_RESULT = json.dumps({"complete": False, "limitations": ["bench: a no-op reviewer, nothing analysed"], "findings": []})
NO_OP_REVIEWER = "echo '" + NO_OP_RESULT + "'"
#: A git revision whose attest/ the same runs are alternated with (its figures the baseline column).
AGAINST_ENV = "ATTEST_BENCH_AGAINST"
STEPS = ("bootstrap", "review start", "review exec", "review recheck", "review serialize")


def _env(s: dict[str, Any], out: Path, backend: str) -> dict[str, str]:
    """The recipe's environment: the deployment's files, the state, the review directory, the no-op reviewer."""
    # Bytecode is written and reused, as in a deployment (pip compiles site-packages at install; the worktree's
    # attest/ compiles on its first run): PYTHONDONTWRITEBYTECODE in the caller's environment would make every
    # command compile its ~120 attest modules again (+0.1-0.3 s a command).
    base = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_") and k != "PYTHONDONTWRITEBYTECODE"}
    return {**base, "ATTEST_PINS": s["pins"], "ATTEST_TRUST": s["trust"], "ATTEST_SKILL": s["skill_dir"],
            "ATTEST_INSTALLATION": s["installation"], "ATTEST_KEY": s["key"], "ATTEST_STATE_DIR": s["state"],
            "ATTEST_REVIEW_DIR": str(out), "ATTEST_BACKEND": backend, "ATTEST_REVIEWER": NO_OP_REVIEWER}


def _just() -> str | None:
    here = Path(sys.executable).parent / "just"
    return str(here) if here.exists() else shutil.which("just")


def _steps(attest: str, s: dict[str, Any], out: Path, backend: str, env: dict[str, str]) -> list[tuple[str, list[str]]]:
    """The five commands exactly as the recipe runs them (its defaults for the projections; no reviewer image)."""
    handoff = str(out / "handoff.json")
    host = ["--identity", s["identity"]]
    return [
        ("bootstrap", [attest, "bootstrap", "--pins", s["pins"], "--policy", s["trust"], "--state-dir", s["state"], "--skill",
                       s["skill_dir"], "--installation", s["installation"], "--repo", s["consumer"], *host, "--key", s["key"],
                       "--backend", backend, "-o", handoff]),
        ("review start", [attest, "review", "start", "--handoff", handoff, "--policy", s["trust"], "--state-dir", s["state"],
                          "--repo", s["consumer"], *host, "--semantic", "docs/review/policy-context.md",
                          "--adapter", "docs/review/github-review.json", "--json"]),
        ("review exec", [attest, "review", "exec", "--handoff", handoff, "--policy", s["trust"], "--state-dir", s["state"],
                         "--review", "{review}", "-o", str(out / "result.json"), "--", "/bin/sh", "-c", env["ATTEST_REVIEWER"]]),
        ("review recheck", [attest, "review", "recheck", "--state-dir", s["state"], "--review", "{review}"]),
        ("review serialize", [attest, "review", "serialize", "--state-dir", s["state"], "--review", "{review}", "--result",
                              str(out / "result.json"), "--key", s["key"], "-o", str(out / "payload.json"),
                              "--record", str(out / "record.json")]),
    ]


def _run_steps(steps: list[tuple[str, list[str]]], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """Run the five commands in order, each timed on its own; the review id is taken from start's --json."""
    times: dict[str, float] = {}
    review = ""
    for name, argv in steps:
        argv = [a.replace("{review}", review) for a in argv]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, cwd=cwd, check=False)
        times[name] = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")
        if name == "review start":
            review = json.loads(proc.stdout)["review"]
    return times


def run(work: Path, args: BenchArgs) -> list[Row]:
    # As the bootstrap case: a temporary directory's sealed images are unsealed before the runner removes it.
    temporary = work.parent == Path(tempfile.gettempdir()) and work.name.startswith("attest-bench-verify-")
    try:
        return _run(work, args)
    finally:
        if temporary:
            _discard(work)


def _run(work: Path, args: BenchArgs) -> list[Row]:
    just = _just()
    if just is None:
        print("  skipped: no `just` (python3 bootstrap.py makes .venv/bin/just)")
        return []
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    s = _set_up(work, sha)
    if s is None:
        return []
    attest = str(args.attest)
    caller = work / "caller"  # the directory `just verify` is called from (its review directory's default place)
    caller.mkdir(exist_ok=True)
    out = caller / "review-out"
    backend = "immutable"
    env = _env(s, out, backend)
    recipe = [just, "--justfile", str(ROOT / "Justfile"), "verify", s["consumer"], "--identity", s["identity"]]
    probe = subprocess.run(recipe, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, cwd=caller, check=False)
    if probe.returncode != 0 and "BACKEND_UNAVAILABLE" in probe.stderr:
        print("  the 'immutable' backend cannot be established here; measuring with 'readonly'")
        backend = "readonly"
        env = _env(s, out, backend)
        probe = subprocess.run(recipe, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, cwd=caller, check=False)
    if probe.returncode != 0:
        raise RuntimeError(f"`just verify` exited {probe.returncode}: {probe.stderr[-3000:]}")
    # The first run above froze what the promotion had not (the installed Skill's copy, the base, the bundle, the
    # change image): every timed run is warm.
    print(f"  consumer {s['consumer']} (base {s['base'][:12]}, head {s['head'][:12]}), backend {backend}; first run:")
    print("".join(f"    {line}\n" for line in probe.stdout.splitlines()), end="")
    from attest.cli._fasthelp import command_module
    from attest.freeze import Store

    if command_module("review") is None:
        print("  NOTE: the help cache is stale (run `python docs/gen_cli.py`): every command builds the whole app, "
              "which these figures then include")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("  PYTHONDONTWRITEBYTECODE is set here; the commands run without it (bytecode written and reused)")
    variants = {"": env}
    against = os.environ.get(AGAINST_ENV)
    if against:
        label, code = _checkout_against(against, work)
        variants[label] = {**env, "PYTHONPATH": code}
        found = subprocess.run([sys.executable, "-c", "import attest; print(attest.__file__)"], capture_output=True, text=True,
                               env=variants[label], cwd=caller, check=True).stdout.strip()
        if not found.startswith(code + "/"):
            raise RuntimeError(f"{AGAINST_ENV}: the commands would import {found}, not the attest/ of {label}")
        print(f"  {AGAINST_ENV}={against}: every recipe run and command also runs with the attest/ of{label} ({code}) "
              "on PYTHONPATH, ahead of the editable install, alternated round by round; the same venv and deployment")
    per_step: dict[str, list[dict[str, float]]] = {v: [] for v in variants}

    def verify(v: str) -> Callable[[], None]:
        def run_recipe() -> None:
            proc = subprocess.run(recipe, stdin=subprocess.DEVNULL, capture_output=True, env=variants[v], cwd=caller, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"`just verify` exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")
        return run_recipe

    def one_by_one(v: str) -> Callable[[], None]:
        return lambda: per_step[v].append(_run_steps(_steps(attest, s, out, backend, variants[v]), variants[v], caller))

    runtime: str = json.loads((out / "start.json").read_bytes())["images"]["runtime"]
    py = sys.executable
    contenders: dict[str, Any] = {}
    for v in variants:
        contenders[f"just verify{v}"] = verify(v)
        contenders[f"steps{v}"] = one_by_one(v)
    contenders.update({
        "attest --version": [attest, "--version"],
        "python": [py, "-c", "pass"],
        "imports": [py, "-c", "import attest.cli._review, attest.review.procedure, attest.attestation"],
        "runtime": lambda: Store(s["state"]).get(runtime),
    })
    samples: dict[str, list[float]] = {}
    m = measure_alternating(contenders, args.runs, samples=samples)
    medians = {v: {name: statistics.median(t[name] for t in per_step[v][1:]) for name in STEPS} for v in variants}  # [0]: warm-up
    case = "just verify, warm store"
    rows = [Row(case, "total: `just verify`, no-op reviewer, vs the 2 s target", m["just verify"], TARGET_S, 1.0,
                "'baseline' is the target itself; runs: " + ", ".join(f"{x:.2f}" for x in samples["just verify"]))]
    rows += [Row(case, f"`attest {name}`", medians[""][name]) for name in STEPS]
    rows.append(Row(case, "sum of the five command medians (the recipe adds bash, just and a `python -c` json read)",
                    sum(medians[""].values())))
    for v in variants:
        if v:
            rows.append(Row(case, f"total: `just verify` vs the same with the attest/ of{v}", m["just verify"], m[f"just verify{v}"],
                            note=f"runs of{v}: " + ", ".join(f"{x:.2f}" for x in samples[f"just verify{v}"])))
            rows += [Row(case, f"`attest {name}` vs{v}", medians[""][name], medians[v][name]) for name in STEPS]
            rows.append(Row(case, f"sum of the five vs{v}", sum(medians[""].values()), sum(medians[v].values())))
    rows.append(Row(case, "the CLI's start-up alone: `attest --version` (the interpreter, site, no typer)", m["attest --version"],
                    note=f"five commands start the CLI five times: {5 * m['attest --version']:.2f} s of start-up alone"))
    rows.append(Row(case, "the venv's `python -c pass`", m["python"]))
    rows.append(Row(case, "`python -c 'import attest.cli._review, attest.review.procedure, attest.attestation'`", m["imports"],
                    note="what a review command imports before any work (typer included; the pydantic its parameter conversion adds is not)"))
    rows.append(Row(case, "one verification of the runtime image (Store.get, in-process: seal, every byte, seal)", m["runtime"],
                    note=f"each of the five commands verifies it once: {5 * m['runtime']:.2f} s of the total"))
    return rows


def _checkout_against(rev: str, work: Path) -> tuple[str, str]:
    """The attest/ package of ``rev`` (this repository's git objects), extracted once under ``work``: (label, directory)."""
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"], capture_output=True, text=True,
                          check=True).stdout.strip()
    where = work / f"against-{full[:12]}"
    if not (where / "attest" / "__init__.py").is_file():
        where.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", full, "attest"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return f" {full[:12]}", str(where)
