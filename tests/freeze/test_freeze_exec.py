"""run_from_images: only sealed store images, a clean environment, nothing written into an image."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.caps import BACKEND, IS_ROOT
from support.store import image_bytes
from support.trees import all_paths, chattr
from test_freeze_store import BACKEND_PARAMS

from attest.errors import EnvironmentFailure, InputError, VerificationError
from attest.freeze import Store, expand_image_refs, freeze_tree, retain_file, run_from_images, seal_memfd, sealed_memfd
from attest.inventory import Inventory, inventory_tree, verify_tree

IMPORT_FROM_IMAGE = (
    "import os, sys; sys.path.insert(0, os.path.join(os.environ['ATTEST_IMAGE_LIB'], 'lib')); "
    "import pkg.mod; print(pkg.mod.VALUE)"
)


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_running_python_from_an_image_leaves_no_pyc_or_any_file(
    src: Path, expected: Inventory, state: Path, backend: str, capfd: pytest.CaptureFixture[str]
) -> None:
    image = freeze_tree(src, expected, state, backend=backend)
    before = all_paths(Path(image.path))
    for argv in ([sys.executable, "-c", IMPORT_FROM_IMAGE], [sys.executable, "-m", "compileall", "-q", "lib"]):
        rc = run_from_images(state, {"lib": image.path}, argv, cwd_image="lib")
        assert rc in (0, 1)  # compileall reports failure when it may not write; python -c succeeds
    assert capfd.readouterr().out.splitlines()[0] == "42"
    assert all_paths(Path(image.path)) == before
    assert not list(Path(image.path).rglob("__pycache__"))
    verify_tree(image.path, inventory_tree(image.path))
    assert os.listdir(state / "runs") == []


def test_exit_status_passes_through_and_the_environment_is_clean(
    src: Path, expected: Inventory, state: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    monkeypatch.setenv("SECRET_TOKEN", "leak")
    monkeypatch.setenv("PASSED_ON", "yes")
    script = (
        "import os, sys, json; e = dict(os.environ); "
        "open(os.path.join(e['TMPDIR'], 'scratch'), 'w').write('t'); "
        "print(json.dumps(e)); sys.exit(7)"
    )
    rc = run_from_images(state, {"tool": image.identity}, [sys.executable, "-c", script], pass_env=["PASSED_ON"], set_env={"MODE": "ci"})
    assert rc == 7
    import json

    env = json.loads(capfd.readouterr().out)
    assert "SECRET_TOKEN" not in env and env["PASSED_ON"] == "yes" and env["MODE"] == "ci"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONNOUSERSITE"] == "1"
    assert env["ATTEST_IMAGE_TOOL"] == image.path
    for var in ("TMPDIR", "HOME", "XDG_CACHE_HOME", "PYTHONPYCACHEPREFIX"):
        assert env[var].startswith(f"{state.resolve()}/runs/") and not env[var].startswith(image.path)
    assert os.listdir(state / "runs") == []  # the run's scratch space is gone
    assert run_from_images(state, {"tool": image.path}, ["sh", "-c", "kill -TERM $$"]) == 128 + 15


def test_exec_refuses_anything_but_a_sealed_store_image(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    with pytest.raises(VerificationError) as err:
        run_from_images(state, {"src": str(src)}, ["true"])
    assert err.value.code == "NOT_IN_STORE"
    chattr("-i", Path(image.path) / "bin" / "tool")
    with pytest.raises(VerificationError) as err:
        run_from_images(state, {"tool": image.path}, ["true"])
    assert err.value.code == "IMAGE_NOT_IMMUTABLE"


@pytest.mark.parametrize(
    ("images", "kwargs"),
    [
        ({"1bad": "x"}, {}),
        ({"a": "x", "A": "y"}, {}),
        ({}, {}),
        ({"a": "x"}, {"cwd_image": "b"}),
    ],
)
def test_bad_image_references_are_usage_errors(state: Path, images: dict[str, str], kwargs: dict[str, str]) -> None:
    with pytest.raises(InputError) as err:
        run_from_images(state, images, ["true"], **kwargs)
    assert err.value.code == "BAD_IMAGE_REF"


def test_fixed_variables_cannot_be_overridden(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    with pytest.raises(InputError) as err:
        run_from_images(state, {"t": image.path}, ["true"], set_env={"PYTHONDONTWRITEBYTECODE": ""})
    assert err.value.code == "BAD_EXEC_ENV"
    with pytest.raises(InputError) as err:
        run_from_images(state, {"t": image.path}, ["true"], pass_env=["NOT A NAME"])
    assert err.value.code == "BAD_EXEC_ENV"


@pytest.mark.parametrize(("argv", "code"), [(["/nonexistent/command"], "COMMAND_NOT_FOUND"),
                                           (["$ATTEST_IMAGE_T/README"], "COMMAND_NOT_EXECUTABLE"),   # a file without x bits
                                           (["$ATTEST_IMAGE_T/lib"], "COMMAND_NOT_EXECUTABLE"),     # a directory
                                           (["/" + "x" * 300], "EXEC_FAILED")])                     # ENAMETOOLONG
def test_a_command_that_cannot_start_is_reported(src: Path, expected: Inventory, state: Path, argv: list[str], code: str) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    with pytest.raises(InputError) as err:
        run_from_images(state, {"t": image.path}, argv)
    assert err.value.code == code


def test_exec_failures_exit_as_env_does(src: Path, expected: Inventory, state: Path, tmp_path: Path) -> None:
    """125 attest exec failed, 126 not executable, 127 not found; anything else is the command's."""
    from attest.cli import main

    image = freeze_tree(src, expected, state, backend=BACKEND)
    base = ["exec", "--state-dir", str(state), "--image", f"t={image.path}", "--"]
    assert main([*base, "/nonexistent/command"]) == 127
    assert main([*base, "$ATTEST_IMAGE_T/README"]) == 126
    assert main([*base, "/bin/sh", "-c", "exit 125"]) == 125              # the command's own 125 (ambiguous, as with env)
    assert main([*base, "/bin/sh", "-c", "exit 3"]) == 3
    assert main(["exec", "--state-dir", str(state), "--image", "t=sha256:" + "0" * 64, "--", "/bin/true"]) == 125  # NOT_IN_STORE
    assert main(["exec", "--state-dir", str(state), "--image", f"t={image.path}", "--env", "LD_PRELOAD=/x", "--", "/bin/true"]) == 125
    assert main([*base, "$ATTEST_IMAGE_NOPE/x"]) == 125                    # BAD_IMAGE_REF


def test_a_command_that_writes_a_readonly_image_as_root_or_its_owner_fails_closed(src: Path, expected: Inventory, state: Path) -> None:
    """readonly holds only against other users: the write succeeds, and exec refuses its result.

    Root bypasses the missing write bits; the owner (an ordinary user) gives itself the write bit
    back for the write and takes it away again.
    """
    image = freeze_tree(src, expected, state, backend="readonly")
    write = 'echo x >> "$ATTEST_IMAGE_T/README"' if IS_ROOT else 'f="$ATTEST_IMAGE_T/README"; chmod u+w "$f" && echo x >> "$f" && chmod a-w "$f"'
    with pytest.raises(VerificationError) as err:
        run_from_images(state, {"t": image.path}, ["sh", "-c", write])
    assert err.value.code == "IMAGE_CHANGED_DURING_EXEC"
    assert "IMAGE_CHANGED" in {f.code for f in err.value.findings}


@pytest.mark.parametrize("backend", [p for p in BACKEND_PARAMS if p.values[0] != "readonly"])  # type: ignore[attr-defined]
def test_a_command_cannot_write_an_immutable_or_ro_bind_image(src: Path, expected: Inventory, state: Path, backend: str) -> None:
    image = freeze_tree(src, expected, state, backend=backend)
    rc = run_from_images(state, {"t": image.path}, ["sh", "-c", 'echo x >> "$ATTEST_IMAGE_T/README" || exit 9; exit 0'])
    assert rc == 9
    Store(state).get(image.identity)  # every byte, as every use reads them (erofs: through a mount)
    assert image_bytes(image.path, "README") == b"hello\n"


def test_retained_bytes_are_the_verified_bytes(src: Path, expected: Inventory, state: Path) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    entry = expected.by_path()["lib/pkg/mod.py"]
    kept = retain_file(image, "lib/pkg/mod.py", entry.sha256 or "")
    assert kept.data == b"VALUE = 41 + 1\n" and kept.sha256 == entry.sha256 and isinstance(kept.data, bytes)
    with pytest.raises(VerificationError) as err:
        retain_file(image, "README", entry.sha256 or "")
    assert err.value.code == "RETAINED_MISMATCH"
    with pytest.raises(VerificationError) as err:
        retain_file(image, "lib", entry.sha256 or "")
    assert err.value.code == "RETAINED_MISMATCH"
    with pytest.raises(InputError) as err:
        retain_file(image, "../etc/passwd", entry.sha256 or "")
    assert err.value.code == "BAD_PATH"
    chattr("-i", Path(image.path) / "lib" / "pkg" / "mod.py")
    with pytest.raises(VerificationError) as err:
        retain_file(image, "lib/pkg/mod.py", entry.sha256 or "")
    assert err.value.code == "IMAGE_NOT_IMMUTABLE"
    chattr("+i", Path(image.path) / "lib" / "pkg" / "mod.py")
    with pytest.raises(VerificationError) as err:
        retain_file(image, "lib/pkg/mod.py", entry.sha256 or "")
    assert err.value.code == "IMAGE_CHANGED"


def test_a_sealed_memfd_can_be_read_by_a_child_and_changed_by_nobody() -> None:
    data = b"exactly the verified bytes\n"
    fd = sealed_memfd(data)
    try:
        with pytest.raises(PermissionError):
            os.write(fd, b"x")
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)
        with pytest.raises(PermissionError):
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 0)  # F_SEAL_SEAL: no seal can be added or removed
        child = (
            "import os, sys\n"
            "fd = int(sys.argv[1])\n"
            "sys.stdout.buffer.write(os.pread(fd, 1 << 16, 0))\n"
            "try:\n"
            "    os.pwrite(fd, b'evil', 0)\n"
            "except PermissionError:\n"
            "    sys.stdout.buffer.write(b'|refused')\n"
            "w = os.open(f'/proc/self/fd/{fd}', os.O_RDWR)\n"
            "try:\n"
            "    os.write(w, b'evil')\n"
            "except PermissionError:\n"
            "    sys.stdout.buffer.write(b'|refused')\n"
        )
        done = subprocess.run([sys.executable, "-c", child, str(fd)], pass_fds=[fd], capture_output=True, check=True)
        assert done.stdout == data + b"|refused|refused"
        assert os.pread(fd, 1 << 16, 0) == data
    finally:
        os.close(fd)


def test_sealing_a_memfd_that_forbids_seals_fails_closed() -> None:
    fd = os.memfd_create("no-sealing", os.MFD_CLOEXEC)  # created without MFD_ALLOW_SEALING
    try:
        with pytest.raises(EnvironmentFailure) as err:
            seal_memfd(fd)
        assert err.value.code == "SEAL_FAILED"
    finally:
        os.close(fd)


# -- naming a program inside an image without a shell ---------------------------------

PATHS = {"RT": "/s/store/aa/tree", "T": "/s/store/bb/tree"}


@pytest.mark.parametrize(("argv", "want"), [
    (["$ATTEST_IMAGE_RT/bin/python", "-I"], ["/s/store/aa/tree/bin/python", "-I"]),
    (["${ATTEST_IMAGE_RT}/bin/python"], ["/s/store/aa/tree/bin/python"]),
    (["ls", "$ATTEST_IMAGE_T"], ["ls", "/s/store/bb/tree"]),
    (["echo", "x$ATTEST_IMAGE_T"], ["echo", "x$ATTEST_IMAGE_T"]),          # only a leading reference
    (["echo", "$ATTEST_IMAGE_TX"], None),                                 # no such image: never run literally
    (["$ATTEST_IMAGE_RT_bin"], None),
    (["sh", "-c", 'echo "$ATTEST_IMAGE_T/x"'], ["sh", "-c", 'echo "$ATTEST_IMAGE_T/x"']),  # the shell's business
    (["$ATTEST_IMAGE_RTbin/python"], None),
    (["${ATTEST_IMAGE_RT"], ["${ATTEST_IMAGE_RT"]),
    (["$ATTEST_IMAGE_RT/../../../bin/sh"], None),                          # '..' would leave the image
    (["$ATTEST_IMAGE_RT/bin/./python"], None),
    (["$ATTEST_IMAGE_RT//bin/python"], None),
    (["$ATTEST_IMAGE_RT/"], None),
])
def test_expand_image_refs(argv: list[str], want: list[str] | None) -> None:
    if want is None:
        with pytest.raises(InputError) as err:
            expand_image_refs(argv, PATHS)
        assert err.value.code == "BAD_IMAGE_REF"
    else:
        assert expand_image_refs(argv, PATHS) == want


def test_a_program_inside_an_image_runs_as_documented(src: Path, expected: Inventory, state: Path, capfd: pytest.CaptureFixture[str]) -> None:
    image = freeze_tree(src, expected, state, backend=BACKEND)
    rc = run_from_images(state, {"rt": image.path}, ["/bin/cat", "$ATTEST_IMAGE_RT/README"])
    assert rc == 0 and capfd.readouterr().out == (Path(image.path) / "README").read_text()
