"""`attest exec` gives the command an allowlisted environment (security review).

The review found a denylist that missed JAVA_TOOL_OPTIONS, SHELLOPTS with PS4, GIT_CONFIG_*,
LUA_INIT and others, and let the caller replace PATH (so the ro-bind wrapper's `mount` could be
anything). Each attack below is performed for real, three times:

1. directly, without attest, to prove that the variable makes the victim run the attacker's code
   on this machine (a marker file appears);
2. through :func:`run_from_images` with a real frozen image, the variable named by the caller
   (``set_env`` and ``pass_env``): exec must refuse it with a reason code, never drop it
   silently, and nothing runs;
3. through :func:`run_from_images`, the variable only present in attest's own environment: the
   command runs, and the variable does not reach it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.caps import BACKEND, IS_ROOT
from test_freeze_store import BACKEND_PARAMS, _ro_bind_available

from attest.cli import main
from attest.errors import InputError
from attest.freeze import FreezeCode, Image, RoBindBackend, freeze_tree, run_from_images
from attest.freeze._backends import TOOL_PATH
from attest.freeze._exec import DEFAULT_PATH, FIXED_NAMES, REFUSED_ENV, check_env_name
from attest.inventory import Inventory, inventory_tree, verify_tree

# Run the PS4 victim as nobody: as root it needs setpriv, as an ordinary user it already is one.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if IS_ROOT else []

# An attack: given a lab directory and the marker path, make its files and return (env, argv).
Attack = Callable[[Path, Path], tuple[dict[str, str], list[str]]]


def _needs(*tools: str) -> pytest.MarkDecorator:
    missing = [t for t in tools if shutil.which(t, path=DEFAULT_PATH) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed here: {', '.join(missing)}")


def ld_preload(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    src = lab / "pre.c"
    src.write_text(
        "#include <fcntl.h>\n#include <unistd.h>\n"
        f'__attribute__((constructor)) static void pwn(void) {{ close(open("{marker}", O_CREAT | O_WRONLY, 0644)); }}\n'
    )
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lab / "pre.so"), str(src)], check=True, capture_output=True)
    return {"LD_PRELOAD": str(lab / "pre.so")}, ["/bin/true"]


def python_path(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    (lab / "py").mkdir()
    (lab / "py" / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return {"PYTHONPATH": str(lab / "py")}, [sys.executable, "-c", "pass"]


def bash_env(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    (lab / "rc.sh").write_text(f"touch '{marker}'\n")
    return {"BASH_ENV": str(lab / "rc.sh")}, ["bash", "-c", "true"]


def shellopts_ps4(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    # bash does not import PS4 from the environment when it runs as root: the victim is nobody.
    return {"SHELLOPTS": "xtrace", "PS4": f"$(touch '{marker}')"}, [*NOBODY, "bash", "-c", "true"]


def node_options(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    (lab / "evil.js").write_text(f"require('fs').writeFileSync({json.dumps(str(marker))}, '')\n")
    return {"NODE_OPTIONS": f"--require {lab / 'evil.js'}"}, ["node", "-e", "0"]


def perl5opt(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    (lab / "pl").mkdir()
    (lab / "pl" / "evil.pm").write_text(f"package evil; open(my $f, '>', '{marker}'); 1;\n")
    return {"PERL5LIB": str(lab / "pl"), "PERL5OPT": "-Mevil"}, ["perl", "-e", "1"]


def git_config_count(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.sshCommand", "GIT_CONFIG_VALUE_0": f"touch '{marker}'; false"}
    return env, ["git", "ls-remote", "ssh://example.invalid/repo"]


def git_config_parameters(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    env = {"GIT_CONFIG_PARAMETERS": f"'core.sshcommand'='touch {marker}; false'"}
    return env, ["git", "ls-remote", "ssh://example.invalid/repo"]


def tar_options(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    (lab / "f").write_text("x")
    return {"TAR_OPTIONS": f"--checkpoint=1 --checkpoint-action=exec=touch\\ {marker}"}, ["tar", "cf", "/dev/null", "f"]


def java_tool_options(lab: Path, marker: Path) -> tuple[dict[str, str], list[str]]:
    (lab / "Agent.java").write_text(
        "public class Agent { public static void premain(String a) throws Exception {"
        " java.nio.file.Files.write(java.nio.file.Paths.get(a), new byte[0]); } }\n"
    )
    (lab / "manifest.txt").write_text("Premain-Class: Agent\n")
    subprocess.run(["javac", "-d", str(lab), str(lab / "Agent.java")], check=True, capture_output=True)
    subprocess.run(["jar", "cfm", str(lab / "agent.jar"), str(lab / "manifest.txt"), "-C", str(lab), "Agent.class"], check=True, capture_output=True)
    return {"JAVA_TOOL_OPTIONS": f"-javaagent:{lab / 'agent.jar'}={marker}"}, ["java", "-version"]


ATTACKS = [
    pytest.param(ld_preload, id="LD_PRELOAD", marks=_needs("gcc")),
    pytest.param(python_path, id="PYTHONPATH-sitecustomize"),
    pytest.param(bash_env, id="BASH_ENV", marks=_needs("bash")),
    pytest.param(shellopts_ps4, id="SHELLOPTS-PS4", marks=_needs("bash", "setpriv")),
    pytest.param(node_options, id="NODE_OPTIONS", marks=_needs("node")),
    pytest.param(perl5opt, id="PERL5OPT", marks=_needs("perl")),
    pytest.param(git_config_count, id="GIT_CONFIG_COUNT", marks=_needs("git")),
    pytest.param(git_config_parameters, id="GIT_CONFIG_PARAMETERS", marks=_needs("git")),
    pytest.param(java_tool_options, id="JAVA_TOOL_OPTIONS", marks=_needs("java", "javac", "jar")),
    pytest.param(tar_options, id="TAR_OPTIONS", marks=_needs("tar")),
]


@pytest.fixture
def lab() -> Iterator[Path]:
    """A directory every user can write (the PS4 victim runs as nobody), removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="attest-exec-lab-", dir="/tmp"))
    os.chmod(d, 0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def image(src: Path, expected: Inventory, state: Path) -> Image:
    return freeze_tree(src, expected, state, backend=BACKEND)


def _run_directly(argv: list[str], env: dict[str, str], lab: Path) -> None:
    subprocess.run(argv, env={"PATH": DEFAULT_PATH, "HOME": str(lab), **env}, cwd=lab, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_code_loading_variable_is_refused_and_never_reaches_the_command(
    attack: Attack, lab: Path, image: Image, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = lab / "pwned"
    env, argv = attack(lab, marker)
    # 1. The attack works here when the variable reaches the victim.
    _run_directly(argv, env, lab)
    assert marker.exists(), "the attack does not work on this machine; the test would prove nothing"
    marker.unlink()
    refused = {(FreezeCode.ENV_REFUSED.value, var) for var in env}
    # 2. Named by the caller: refused, every variable reported, nothing run.
    with pytest.raises(InputError) as err:
        run_from_images(state, {"t": image.path}, argv, set_env=env)
    assert {(f.code, f.path) for f in err.value.findings} == refused
    with monkeypatch.context() as m:
        for var, value in env.items():
            m.setenv(var, value)
        with pytest.raises(InputError) as err:
            run_from_images(state, {"t": image.path}, argv, pass_env=list(env))
        assert {(f.code, f.path) for f in err.value.findings} == refused
        assert not marker.exists()
        # 3. Present in attest's own environment only: the command runs without it.
        run_from_images(state, {"t": image.path}, argv)
    assert not marker.exists()
    verify_tree(image.path, inventory_tree(image.path))


def test_path_is_fixed_even_when_the_caller_or_attest_itself_has_a_planted_sh(lab: Path, image: Image, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = lab / "pwned"
    evil = lab / "bin"
    evil.mkdir()
    for tool in ("sh", "mount", "unshare"):
        (evil / tool).write_text(f"#!/bin/sh\ntouch '{marker}'\n")
        (evil / tool).chmod(0o755)
    _run_directly(["sh", "-c", "true"], {"PATH": f"{evil}:{DEFAULT_PATH}"}, lab)
    assert marker.exists()
    marker.unlink()
    for how in ({"set_env": {"PATH": f"{evil}:{DEFAULT_PATH}"}}, {"pass_env": ["PATH"]}):
        with monkeypatch.context() as m:
            m.setenv("PATH", f"{evil}:{os.environ['PATH']}")
            with pytest.raises(InputError) as err:
                run_from_images(state, {"t": image.path}, ["sh", "-c", "true"], **how)  # type: ignore[arg-type]
        assert [(f.code, f.path) for f in err.value.findings] == [("BAD_EXEC_ENV", "PATH")]
    with monkeypatch.context() as m:
        m.setenv("PATH", f"{evil}:{os.environ['PATH']}")
        assert run_from_images(state, {"t": image.path}, ["sh", "-c", 'test "$PATH" = ' + DEFAULT_PATH]) == 0
    assert not marker.exists()


@pytest.mark.skipif(_ro_bind_available() is not None, reason=f"ro-bind not available here: {_ro_bind_available()}")
def test_the_ro_bind_wrapper_never_finds_mount_on_the_commands_path(lab: Path, tmp_path: Path) -> None:
    """A fake mount(8) first on PATH would "succeed" without mounting and leave the image writable."""
    marker = lab / "pwned"
    evil = lab / "bin"
    evil.mkdir()
    (evil / "mount").write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 0\n")
    (evil / "mount").chmod(0o755)
    target = tmp_path / "image"
    target.mkdir()
    backend = RoBindBackend()
    assert os.path.dirname(backend.mount) in TOOL_PATH.split(":") and os.path.dirname(backend.unshare) in TOOL_PATH.split(":")
    probe = 'if echo x > "$1/written" 2>/dev/null; then echo writable; else echo read-only; fi'
    argv = backend.wrap(["/bin/sh", "-c", probe, "sh", str(target)], [str(target)], None)
    done = subprocess.run(argv, env={"PATH": f"{evil}:{DEFAULT_PATH}"}, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "read-only\n"), done.stderr
    assert not marker.exists() and not (target / "written").exists()


def test_a_backend_without_an_absolute_mount_is_unavailable() -> None:
    from attest.errors import EnvironmentFailure

    with pytest.raises(EnvironmentFailure) as err:
        RoBindBackend(mount="mount").probe(-1, "/tmp")
    assert err.value.code == "BACKEND_UNAVAILABLE" and "mount(8)" in err.value.detail


# --- The one rule, table-tested ---------------------------------------------------------------

REFUSED_NAMES = [
    # named in the security review
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT",
    "PERL5OPT", "PERL5LIB", "PERL5DB", "PERLLIB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
    "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "BASH_ENV", "ENV", "SHELLOPTS",
    "BASHOPTS", "PS4", "PROMPT_COMMAND", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0",
    "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_GLOBAL", "GIT_EXEC_PATH", "GIT_SSH_COMMAND", "GIT_DIR", "LUA_INIT",
    "LUA_INIT_5_4", "LUA_PATH", "LUA_PATH_5_4", "LUA_CPATH", "GCONV_PATH", "LOCPATH", "NLSPATH", "MALLOC_CHECK_",
    "MALLOC_PERTURB_", "GLIBC_TUNABLES", "HOSTALIASES", "RESOLV_HOST_CONF", "RES_OPTIONS", "IFS", "CDPATH",
    "XDG_CONFIG_DIRS", "XDG_DATA_DIRS", "XDG_RUNTIME_DIR", "XDG_STATE_HOME",
    # and their neighbours
    "_PYTHON_SYSCONFIGDATA_NAME", "_PYTHON_HOST_PLATFORM", "_PYTHON_PROJECT_BASE",
    "BASH_FUNC_x", "BASH_LOADABLES_PATH", "PS1", "ZDOTDIR", "FPATH", "INPUTRC", "TMP", "TEMP", "GEM_PATH",
    "npm_config_script_shell", "NPM_CONFIG_USERCONFIG", "OPENSSL_CONF", "OPENSSL_MODULES", "SSL_CERT_FILE",
    "GNUPGHOME", "PIP_INDEX_URL", "PIP_CONFIG_FILE", "CARGO_HOME", "RUSTC_WRAPPER", "RUSTUP_TOOLCHAIN",
    "GOFLAGS", "GOTOOLCHAIN", "MAKEFLAGS", "MAKEFILES", "CONFIG_SITE", "PKG_CONFIG_PATH", "CCACHE_PREFIX",
    "EDITOR", "PAGER", "LESSOPEN", "SHELL", "DYLD_INSERT_LIBRARIES", "TERMINFO", "TERMINFO_DIRS", "TZDIR",
    "GETCONF_DIR", "PHPRC", "TCLLIBPATH", "R_PROFILE_USER", "ERL_FLAGS", "HGRCPATH", "ld_preload",
    # found by the attack review of the allowlist
    "TAR_OPTIONS", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "SYSTEMD_PAGER", "CC", "CFLAGS", "AWKPATH",
    "CORECLR_PROFILER_PATH", "GTK_MODULES", "KUBECONFIG", "AWS_CONFIG_FILE", "UV_INDEX_URL", "LIBMOUNT_FSTAB",
    "SSLKEYLOGFILE", "DOTNET_STARTUP_HOOKS", "GCC_EXEC_PREFIX",
]  # fmt: skip
FIXED = ["PATH", "HOME", "TMPDIR", "LC_ALL", "TZ", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
         "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONPYCACHEPREFIX", "ATTEST_RUN_DIR", "ATTEST_IMAGE_T",
         "ATTEST_ANYTHING"]  # fmt: skip
ALLOWED = ["CI", "MODE", "SOURCE_DATE_EPOCH", "LANG", "TERM", "RUST_BACKTRACE", "ENVIRONMENT", "PATHS", "GOOGLE_X",
           "GITHUB_SHA", "NO_COLOR", "http_proxy", "HOMEBREW_X", "TMPDIR2", "path"]  # fmt: skip


@pytest.mark.parametrize("name", REFUSED_NAMES)
def test_names_that_load_code_or_configuration_are_refused(name: str) -> None:
    problem = check_env_name(name)
    assert problem is not None and problem[0] == FreezeCode.ENV_REFUSED, problem


@pytest.mark.parametrize("name", FIXED)
def test_names_exec_fixes_cannot_be_overridden(name: str) -> None:
    problem = check_env_name(name)
    assert problem is not None and problem[0] == FreezeCode.BAD_EXEC_ENV and "fixed by attest exec" in problem[1]


@pytest.mark.parametrize("name", ALLOWED)
def test_ordinary_names_are_allowed(name: str) -> None:
    assert check_env_name(name) is None


@pytest.mark.parametrize("name", ["", "1X", "A-B", "A B", "A=B", "BASH_FUNC_f%%", "X" * 257, "Ä"])
def test_malformed_names_are_usage_errors(name: str) -> None:
    problem = check_env_name(name)
    assert problem is not None and problem[0] == FreezeCode.BAD_EXEC_ENV and problem[1] == "not an environment variable name"


def test_every_fixed_variable_is_set_by_exec_and_every_pattern_is_well_formed() -> None:
    assert {"PATH", "HOME", "TMPDIR"} <= set(FIXED_NAMES)
    for pattern, why in REFUSED_ENV:
        assert pattern == pattern.upper() and why and "*" not in pattern[:-1]
    assert len({p for p, _ in REFUSED_ENV}) == len(REFUSED_ENV)


def test_every_refusal_is_reported_and_none_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/tmp/evil")
    with pytest.raises(InputError) as err:
        run_from_images(
            tmp_path / "state",
            {"T": "sha256:" + "0" * 64},
            ["true"],
            pass_env=["GIT_DIR", "CI"],
            set_env={"CI": "1", "LUA_INIT": "@/tmp/evil.lua", "HOME": "/root", "OK": "a\0b", "FINE": "yes"},
        )
    assert [(f.code, f.path) for f in err.value.findings] == [
        ("BAD_EXEC_ENV", "CI"),  # both passed through and set
        ("ENV_REFUSED", "GIT_DIR"),
        ("ENV_REFUSED", "LUA_INIT"),
        ("BAD_EXEC_ENV", "HOME"),
        ("BAD_EXEC_ENV", "OK"),  # a NUL byte in the value
    ]
    assert all("/tmp/evil" not in f.detail for f in err.value.findings)  # values are never echoed


def test_the_cli_refuses_with_the_code_and_still_passes_ordinary_variables(image: Image, state: Path, capfd: pytest.CaptureFixture[str]) -> None:
    base = ["exec", "--state-dir", str(state), "--image", f"t={image.path}"]
    assert main([*base, "--env", "GIT_CONFIG_COUNT=1", "--env", "PS4", "--env", "MODE=ci", "--", "true"]) == 125  # exec refused (env(1) style)
    out = capfd.readouterr()
    assert "ENV_REFUSED" in out.err and "GIT_CONFIG_COUNT" in out.err and "PS4" in out.err and "Traceback" not in out.err
    assert main([*base, "--env", "MODE=a", "--env", "MODE=b", "--", "true"]) == 125
    assert "BAD_EXEC_ENV" in capfd.readouterr().err
    assert main([*base, "--env", "MODE=ci", "--", "sh", "-c", 'test "$MODE" = ci && test "$HOME" != /root']) == 0


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_the_command_gets_exactly_the_allowlist(
    src: Path, expected: Inventory, state: Path, backend: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    image = freeze_tree(src, expected, state, backend=backend)
    for var in ("GIT_CONFIG_COUNT", "JAVA_TOOL_OPTIONS", "LUA_INIT", "SHELLOPTS", "BASHOPTS", "PS4", "PASSED_ON", "UNNAMED"):
        monkeypatch.setenv(var, "from-the-caller")
    dump = "import json, os; print(json.dumps(dict(os.environ)))"
    assert run_from_images(state, {"t": image.path}, [sys.executable, "-I", "-c", dump], pass_env=["PASSED_ON"], set_env={"MODE": "ci"}) == 0
    env = json.loads(capfd.readouterr().out)
    # The ro-bind wrapper is a /bin/sh, which exports its working directories (no code loads from them).
    shell_adds = {"PWD", "OLDPWD"} if backend == "ro-bind" else set()
    assert set(env) - shell_adds == {*FIXED_NAMES, "ATTEST_IMAGE_T", "PASSED_ON", "MODE"}
    assert env["PATH"] == DEFAULT_PATH and env["PASSED_ON"] == "from-the-caller"
