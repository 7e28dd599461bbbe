"""Attack review of the command line, backend choice and runtime guard (each test failed before its fix).

Every attack is real: runtimes built in the sandbox from a hostile toolchain commit, the
console script run in a subprocess with its standard streams closed, full or abandoned, and
real FIFOs, links and devices as output paths. Nothing of ``os`` is mocked.

Found and fixed:
- the toolchain's own wheel (built by its untrusted code) could switch the runtime guard off
  with a ``_attest_runtime_guard/`` package (imported before the guard's module), and could ship
  a ``.pth`` through its ``.data/data/lib/pythonX.Y/site-packages/`` (RECORD paths starting with
  ``../`` are outside the ownership check); a locked wheel's ``.pth`` sorting before the guard's
  ran before the check under a wrong interpreter;
- ``attest build --backend immutable`` (or ``$ATTEST_BACKEND``) reused a build whose image was
  sealed ``readonly`` and exited 0;
- a closed or full standard output printed a traceback (``--json``, ``--help``), or exited 0
  (``--help``, ``--version``); a reader that left mid-output (``| head -c1``) got exit 0 for a
  cut-off JSON line under ``PYTHONUNBUFFERED=1``; a closed stderr turned a success into exit 1;
- a name that is not UTF-8 made ``--json`` print bytes that are not UTF-8 (or a traceback
  under a strict locale);
- ``-o`` naming a FIFO, a device or a symbolic link replaced it with a regular file
  (``-o /dev/full`` exited 0 and left /dev/full a file);
- the progress bar drew on stdout: a piped ``attest inventory --digest`` with stderr on a
  terminal printed a blank line before the identity.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from support.build import (
    RUNTIME_RECIPE,
    SKILL_RECIPE,
    build_runtime_or_error,
    make_toolchain_repo,
    make_wheel,
    pylock_text,
    rewrite_wheel_hook,
    write_lock,
)
from support.caps import IS_ROOT

ENV = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_") and k not in ("PYTHONIOENCODING", "PYTHONUNBUFFERED")}
PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"


def _attest(*args: str, cwd: Path, env: dict[str, str] | None = None, shell_redirect: str = "", stdout: object = subprocess.PIPE,
            timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    """The console script (``python -m attest``), optionally with a shell redirection of its streams."""
    argv = [sys.executable, "-m", "attest", *args]
    if shell_redirect:
        argv = ["/bin/sh", "-c", f'exec "$0" "$@" {shell_redirect}', *argv]
    return subprocess.run(argv, cwd=cwd, env=env or ENV, stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          timeout=timeout)


def _no_traceback(done: subprocess.CompletedProcess[bytes]) -> None:
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"a\n")
    (root / "sub" / "b.txt").write_bytes(b"b\n")
    return root


# -- 1. the runtime guard ---------------------------------------------------------------------


def _runtime_project(tmp_path: Path, *, hook: str | None = None, early_pth: bool = False) -> tuple[Path, str]:
    root = tmp_path / "proj"
    wheels = root / "lockfiles" / "wheels"
    wheels.mkdir(parents=True)
    lock = write_lock(root, wheels)
    if early_pth:  # a locked distribution whose .pth sorts before 00-attest-runtime-guard.pth
        early = make_wheel(wheels, "early", "1.0", {"0.pth": b"import sys; sys.stderr.write('EARLY RAN\\n')\n", "early/__init__.py": b""})
        tiny = next(wheels.glob("tinybackend-*.whl"))
        libdep = next(wheels.glob("libdep-*.whl"))
        lock.write_text(pylock_text([("tinybackend", "1.0", tiny), ("libdep", "1.2", libdep), ("early", "1.0", early)], wheels))
    sha = make_toolchain_repo(root / "repo", build_hook=rewrite_wheel_hook(hook) if hook is not None else None)
    (root / "builders").mkdir()
    (root / "builders" / "runtime.toml").write_text(RUNTIME_RECIPE)
    return root / "builders" / "runtime.toml", sha





HOSTILE_GUARD = {
    # A package directory is found before a module of the same name in one directory.
    "guard-package": "body['toolchain-0.1.data/purelib/_attest_runtime_guard/__init__.py'] = b''\n",
    # A .pth through the data scheme: RECORD says ../../../lib/..., which the ownership check skips.
    "pth-through-data": f"body['toolchain-0.1.data/data/lib/{PY}/site-packages/000.pth'] = b'import sys; sys.stderr.write(\"PWNED\\\\n\")\\n'\n",
}


@pytest.mark.parametrize("attack", sorted(HOSTILE_GUARD))
def test_the_toolchain_wheel_cannot_switch_the_runtime_guard_off(tmp_path: Path, attack: str, other_libpython: dict[str, str]) -> None:
    recipe, sha = _runtime_project(tmp_path, hook=HOSTILE_GUARD[attack])
    result = build_runtime_or_error(tmp_path, recipe, sha)
    if not isinstance(result, BaseException):  # what the attack did before the fix: run under another libpython
        tool = Path(result.store_path) / "bin" / "tool"  # type: ignore[attr-defined]
        ran = subprocess.run([tool], capture_output=True, env=other_libpython, timeout=60)
        pytest.fail(f"the hostile runtime was built; under another libpython it exited {ran.returncode}: {ran.stdout!r} {ran.stderr!r}")
    from attest.errors import AttestError

    assert isinstance(result, AttestError), result
    assert "BUILD_STEP_FAILED" in {f.code for f in result.findings}, result
    assert "runtime guard" in str(result) or "site-packages" in str(result), result


def test_a_locked_pth_that_sorts_before_the_guard_is_refused(tmp_path: Path) -> None:
    recipe, sha = _runtime_project(tmp_path, early_pth=True)
    result = build_runtime_or_error(tmp_path, recipe, sha)
    from attest.errors import AttestError

    assert isinstance(result, AttestError), "a .pth that runs before the interpreter check was installed"
    assert "before the runtime guard" in str(result), result


def test_the_guard_refuses_another_libpython_and_the_launchers_cannot_skip_it(tmp_path: Path, other_libpython: dict[str, str]) -> None:
    """What held: the guard sees a libpython loaded from elsewhere; the launchers run with -I (no
    PYTHONPATH, PYTHONSTARTUP or user site); 3.11's site module is frozen, so a site.py on
    PYTHONPATH does not replace it either."""
    recipe, sha = _runtime_project(tmp_path)
    result = build_runtime_or_error(tmp_path, recipe, sha)
    assert not isinstance(result, BaseException), result
    root = Path(result.store_path)  # type: ignore[attr-defined]
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "site.py").write_text("print('shadow site')\n")
    (shadow / "sitecustomize.py").write_text("print('shadow sitecustomize')\n")
    env = {**other_libpython, "PYTHONPATH": str(shadow), "PYTHONSTARTUP": str(shadow / "site.py")}
    for argv in ([root / "bin" / "tool"], [root / "bin" / "libdep-hello"], [root / "bin" / "python", "-c", "print('ran')"],
                 [root / "bin" / "python", "-E", "-c", "print('ran')"]):
        ran = subprocess.run(argv, capture_output=True, env=env, timeout=60)
        assert ran.returncode == 70 and ran.stdout == b"", (argv, ran)
        assert b"built for another interpreter (libpython differ)" in ran.stderr, (argv, ran.stderr)


# -- 2. the backend ---------------------------------------------------------------------------


def _skill_project(tmp_path: Path) -> tuple[Path, str, Path]:
    """A toolchain repository with the skill recipe in builders/, its full SHA, and an empty state directory."""
    root = tmp_path / "proj"
    sha = make_toolchain_repo(root / "repo")
    (root / "builders").mkdir()
    (root / "builders" / "skill.toml").write_text(SKILL_RECIPE)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return root, sha, state


def test_a_build_is_not_reused_from_an_image_of_another_backend(tmp_path: Path) -> None:
    root, sha, state = _skill_project(tmp_path)
    base = ("build", "skill", "builders/skill.toml", "--skill-rev", sha, "--state-dir", str(state), "--json")
    first = _attest(*base, "--backend", "readonly", cwd=root)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["backend"] == "readonly"
    for how in (("--backend", "immutable"), ()):
        env = dict(ENV) if how else {**ENV, "ATTEST_BACKEND": ""}  # empty: the default, immutable
        again = _attest(*base, *how, cwd=root, env=env)
        _no_traceback(again)
        doc = json.loads(again.stdout)
        assert again.returncode == 1 and doc["ok"] is False, doc
        assert [e["code"] for e in doc["errors"]] == ["STORE_CONFLICT"], doc
        assert "readonly" in doc["errors"][0]["detail"]
    same = _attest(*base, cwd=root, env={**ENV, "ATTEST_BACKEND": "readonly"})
    assert same.returncode == 0 and json.loads(same.stdout)["reused"] is True, same.stderr


def test_rebuild_freezes_its_first_build_with_the_backend_it_is_given(tmp_path: Path) -> None:
    """`attest rebuild --backend` as `attest build --backend`: the first build it makes is frozen so, and a rebuild naming
    another backend than the stored image's is refused, never a silent reuse."""
    root, sha, state = _skill_project(tmp_path)
    base = ("rebuild", "builders/skill.toml", "--rev", sha, "--state-dir", str(state), "--json")
    done = _attest(*base, "--backend", "readonly", cwd=root)
    _no_traceback(done)
    assert done.returncode == 0 and json.loads(done.stdout)["ok"] is True, done.stdout + done.stderr
    built = _attest("build", "skill", "builders/skill.toml", "--skill-rev", sha, "--state-dir", str(state), "--json", "--backend",
                    "readonly", cwd=root)
    doc = json.loads(built.stdout)
    assert built.returncode == 0 and doc["reused"] is True and doc["backend"] == "readonly", doc
    other = _attest(*base, "--backend", "immutable", cwd=root)
    _no_traceback(other)
    doc = json.loads(other.stdout)
    assert other.returncode == 1 and [e["code"] for e in doc["errors"]] == ["STORE_CONFLICT"], doc


@pytest.mark.parametrize("value", [" ", "readonly ", "IMMUTABLE", "\udcff"])
def test_a_strange_backend_value_is_bad_usage(tmp_path: Path, tree: Path, value: str) -> None:
    env = {**ENV, "ATTEST_BACKEND": value}
    done = subprocess.run([sys.executable, "-m", "attest", "build", "skill", "--skill-rev", "0" * 40, "--state-dir", str(tmp_path / "s"), "--json"],
                          cwd=tmp_path, env={k: os.fsencode(v) for k, v in env.items()}, capture_output=True, timeout=120)  # type: ignore[misc]
    _no_traceback(done)
    doc = json.loads(done.stdout.decode("utf-8"))
    assert done.returncode == 2 and [e["code"] for e in doc["errors"]] == ["UNKNOWN_BACKEND"], doc


# -- 3. exit codes and --json on a closed, full or abandoned stdout ----------------------------

STDOUT_COMMANDS = [("--help",), ("--version",), ("inventory", "--help"), ("inventory", "TREE"), ("inventory", "TREE", "--json"),
                   ("inventory", "TREE", "--digest")]


def _args(cmd: tuple[str, ...], tree: Path) -> list[str]:
    return [str(tree) if a == "TREE" else a for a in cmd]


@pytest.mark.parametrize("cmd", STDOUT_COMMANDS, ids=" ".join)
def test_a_closed_stdout_is_an_error_not_a_traceback_or_success(tmp_path: Path, tree: Path, cmd: tuple[str, ...]) -> None:
    done = _attest(*_args(cmd, tree), cwd=tmp_path, shell_redirect=">&-", stdout=None)
    _no_traceback(done)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert b"cannot write to standard output" in done.stderr, done.stderr


@pytest.mark.parametrize("cmd", STDOUT_COMMANDS, ids=" ".join)
def test_a_full_stdout_is_an_error_not_a_traceback_or_success(tmp_path: Path, tree: Path, cmd: tuple[str, ...]) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as full:
        done = _attest(*_args(cmd, tree), cwd=tmp_path, stdout=full)
    _no_traceback(done)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert b"No space left on device" in done.stderr, done.stderr


def test_a_verification_failure_keeps_exit_1_when_its_json_cannot_be_printed(tmp_path: Path, tree: Path) -> None:
    inv = tmp_path / "inv.json"
    assert _attest("inventory", str(tree), "-o", str(inv), cwd=tmp_path).returncode == 0
    (tree / "a.txt").write_bytes(b"changed\n")
    done = _attest("check", str(tree), "--inventory", str(inv), "--json", cwd=tmp_path, shell_redirect=">&-", stdout=None)
    _no_traceback(done)
    assert done.returncode == 1, done.stderr
    assert b"DIGEST_MISMATCH" in done.stderr and b"cannot write to standard output" in done.stderr, done.stderr


def test_a_reader_that_leaves_mid_output_is_not_success(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(4000):
        (big / f"f{i}").write_bytes(b"%d\n" % i)
    # PYTHONUNBUFFERED=1 (as CI images set it): Python's unbuffered stdout reported the pipe's short write as success.
    for extra, unbuffered in ((), {}), (("--json",), {}), ((), {"PYTHONUNBUFFERED": "1"}), (("--json",), {"PYTHONUNBUFFERED": "1"}):
        p = subprocess.Popen([sys.executable, "-m", "attest", "inventory", str(big), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**ENV, **unbuffered}, cwd=tmp_path)
        assert p.stdout is not None and p.stderr is not None
        p.stdout.read(1)
        p.stdout.close()  # as `| head -c1` does: the JSON line is cut off
        err = p.stderr.read()
        assert p.wait(timeout=120) == 1, (extra, unbuffered, err)
        assert b"Traceback" not in err and b"Exception ignored" not in err, err


def test_a_closed_stderr_does_not_change_the_exit_status(tmp_path: Path, tree: Path) -> None:
    ok = _attest("inventory", str(tree), "--digest", cwd=tmp_path, shell_redirect="2>&-")
    assert ok.returncode == 0 and ok.stdout.startswith(b"sha256:"), ok
    bad = _attest("inventory", str(tmp_path / "missing"), cwd=tmp_path, shell_redirect="2>&-")
    assert bad.returncode == 2, bad
    closed_in = _attest("inventory", str(tree), "--digest", cwd=tmp_path, shell_redirect="<&-")
    assert closed_in.returncode == 0, closed_in


@pytest.mark.parametrize("strict", [False, True])
def test_json_is_valid_utf8_for_a_name_that_is_not(tmp_path: Path, strict: bool) -> None:
    missing = os.fsencode(tmp_path) + b"/no\xffsuch"
    env = {**ENV, "LC_ALL": "C.UTF-8", **({"PYTHONIOENCODING": "utf-8:strict"} if strict else {})}
    done = subprocess.run([sys.executable, "-m", "attest", "inventory", missing, "--json"], capture_output=True, env=env, cwd=tmp_path,
                          timeout=120)
    _no_traceback(done)
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0].decode("utf-8"))  # strict UTF-8: a raw \xff byte fails here
    assert doc["schema"] == 1 and doc["errors"][0]["code"] == "BAD_ROOT"
    assert os.fsencode(doc["errors"][0]["path"]) == missing  # the \udcff escape round-trips to the name's bytes


def test_an_output_path_that_is_a_fifo_device_or_link_is_refused(tmp_path: Path, tree: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "target.json"
    target.write_bytes(b"keep\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    places = [fifo, link]
    if IS_ROOT:  # a device node of our own (the real attack was -o /dev/full, or /dev/stdout as root)
        dev = tmp_path / "null-device"
        subprocess.run(["mknod", str(dev), "c", "1", "3"], check=True)
        places.append(dev)
    for place in places:
        before = os.lstat(place)
        done = _attest("inventory", str(tree), "-o", str(place), "--json", cwd=tmp_path)
        _no_traceback(done)
        doc = json.loads(done.stdout)
        assert done.returncode == 2 and [e["code"] for e in doc["errors"]] == ["BAD_OUTPUT_PATH"], (place, doc)
        after = os.lstat(place)
        assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode), f"{place} was replaced"
    assert target.read_bytes() == b"keep\n"
    regular = tmp_path / "out.json"
    assert _attest("inventory", str(tree), "-o", str(regular), cwd=tmp_path).returncode == 0
    assert _attest("inventory", str(tree), "-o", str(regular), cwd=tmp_path).returncode == 0  # replacing a regular file is fine


# -- 4. piped output --------------------------------------------------------------------------


def test_the_progress_bar_never_reaches_a_piped_stdout(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(3000):
        (big / f"f{i}").write_bytes(b"x" * 512)
    master, slave = pty.openpty()
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-m", "attest", "inventory", str(big), "--digest"], stdout=w, stderr=slave, stdin=subprocess.DEVNULL,
                         env=ENV, cwd=tmp_path)
    os.close(w)
    os.close(slave)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    assert p.wait(timeout=120) == 0
    os.close(master)
    assert out.startswith(b"sha256:") and out.count(b"\n") == 1 and b"\x1b" not in out, out
