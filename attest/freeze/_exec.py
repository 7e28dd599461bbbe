"""Run a command from frozen images only (docs/freeze.md "exec: running from frozen images only").

1. Every image must be a published store entry whose seal still holds (:func:`Store.get`); a
   runtime image's recorded host libraries must still have their bytes
   (:func:`~attest.freeze._hostlibs.verify_host_libraries`, ``HOST_LIBRARY_CHANGED``).
2. The command gets an allowlisted environment: the fixed minimal one (:data:`FIXED_NAMES`: a
   fixed ``PATH``, ``LC_ALL``, ``TZ``, ``PYTHONDONTWRITEBYTECODE=1``, ``PYTHONNOUSERSITE=1``,
   ``PYTHONPYCACHEPREFIX``, ``HOME``/``TMPDIR``/``XDG_*_HOME`` in a fresh private run directory
   under ``STATE/runs``, outside every image), each image's path as ``ATTEST_IMAGE_<NAME>``, and
   only the variables the caller names (``pass_env`` / ``set_env``). Each named variable goes
   through :func:`check_env_name`: one that exec fixes is ``BAD_EXEC_ENV``, one on the list of
   names that load code or configuration (:data:`REFUSED_ENV`: ``LD_*``, ``PYTHON*``,
   ``JAVA_TOOL_OPTIONS``, ``GIT_*``, ``SHELLOPTS``, ``PS4``, ...) is ``ENV_REFUSED``. Nothing is
   dropped silently: the whole call fails, naming every refused variable.
3. Images sealed with ``ro-bind`` are exposed through read-only bind mounts in a private mount
   namespace for the command.
   An argument ``$ATTEST_IMAGE_<NAME>[/...]`` names a path inside an image without a shell
   (:func:`expand_image_refs`).
4. After the command ends every image is checked again; an image that changed while the
   command ran fails closed (``IMAGE_CHANGED_DURING_EXEC``) whatever the command returned.
   Otherwise the command's exit status is passed through.

    >>> rc = run_from_images("/var/lib/attest", {"RUNTIME": "sha256:..."}, ["python3", "-I", "-B", "-c", "..."])
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from .._session import relay, start
from ..errors import EnvironmentFailure, Finding, InputError, VerificationError
from ._backends import BACKENDS
from ._codes import FreezeCode
from ._erofs import wrap_command
from ._erofs_image import open_checked_image_file
from ._hostlibs import verify_host_libraries
from ._image import VERIFIED, Image, check_image
from ._state import make_private_dir, open_state, open_sub, random_name, remove_tree, state_lock
from ._store import Store

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}\Z")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

#: The variables exec sets itself (with ``ATTEST_*``): the caller can never override one.
FIXED_NAMES: dict[str, str] = {
    "PATH": f"commands are found on the fixed {DEFAULT_PATH}; name a program inside an image by its path ($ATTEST_IMAGE_X/bin/tool)",
    "LC_ALL": "the locale is fixed to C.UTF-8 (a locale name can also be a path to locale data)",
    "TZ": "the time zone is fixed to UTC (a TZ value can also be a path to a zone file)",
    "HOME": "HOME is a fresh empty directory, so no ~/.gitconfig, ~/.npmrc, ~/.local site-packages ... is read",
    "TMPDIR": "temporary files stay in the private run directory, where no other process can plant or swap them",
    "XDG_CACHE_HOME": "caches stay in the private run directory",
    "XDG_CONFIG_HOME": "configuration is looked up in the private run directory only",
    "XDG_DATA_HOME": "data is looked up in the private run directory only",
    "PYTHONDONTWRITEBYTECODE": "Python never writes bytecode next to image files",
    "PYTHONNOUSERSITE": "Python never adds a user site directory",
    "PYTHONPYCACHEPREFIX": "bytecode goes to the private run directory",
    "ATTEST_RUN_DIR": "the private run directory of this command",
}

# (pattern, why): a pattern ending in "*" is a prefix; matched case-insensitively, since some
# programs read lower-case spellings too (npm_config_*). One list, the only one: every name a
# caller passes or sets is judged against it by check_env_name.
_LOADER = "the dynamic loader preloads, audits or searches libraries with it"
_PROGRAM = "programs run the command it names"
_TRUST = "it chooses which certificate authorities or keys are trusted"
REFUSED_ENV: tuple[tuple[str, str], ...] = (
    # The C library and the dynamic loader.
    ("LD_*", _LOADER),
    ("DYLD_*", _LOADER),
    ("GCONV_PATH", "glibc loads character-set conversion modules (shared objects) from it"),
    ("GETCONF_DIR", "getconf runs the programs it finds there"),
    ("LOCPATH", "glibc loads locale data from it"),
    ("NLSPATH", "message catalogs are read from it"),
    ("MALLOC_*", "glibc's allocator is configured from it"),
    ("GLIBC_TUNABLES", "glibc configures itself from it (CVE-2023-4911)"),
    ("HOSTALIASES", "the resolver reads host aliases from the file it names"),
    ("RESOLV_*", "the resolver is configured from it"),
    ("RES_OPTIONS", "the resolver is configured from it"),
    ("LOCALDOMAIN", "the resolver is configured from it"),
    ("TZDIR", "time zone files are read from it"),
    ("LANGUAGE", "gettext follows it (even '../..') to message catalogs, whose format strings programs print"),
    ("TEXTDOMAIN*", "gettext reads message catalogs from the directory it names"),
    ("LESSKEY*", "less reads key bindings (and commands) from it"),
    ("CURL_HOME", "curl reads its configuration from it"),
    ("WGETRC", "wget reads its configuration from it"),
    ("TMP", "temporary files would go to a shared directory outside the private run directory"),
    ("TEMP", "temporary files would go to a shared directory outside the private run directory"),
    ("TEMPDIR", "temporary files would go to a shared directory outside the private run directory"),
    ("XDG_*", "configuration, data and caches are looked up there (XDG_CONFIG_DIRS, XDG_DATA_DIRS, ...)"),
    # Shells.
    ("ENV", "a POSIX shell runs the file it names at startup"),
    ("BASH_*", "bash runs BASH_ENV at startup and imports functions (BASH_FUNC_*) and loadable builtins"),
    ("SHELLOPTS", "bash turns on the options it lists at startup (xtrace with PS4 runs code)"),
    ("BASHOPTS", "bash turns on the options it lists at startup"),
    ("PS1", "the shell expands it, command substitutions included"),
    ("PS2", "the shell expands it, command substitutions included"),
    ("PS3", "the shell expands it, command substitutions included"),
    ("PS4", "the shell expands it before every traced command, command substitutions included"),
    ("PROMPT_COMMAND", "bash runs it"),
    ("IFS", "it changes how every shell splits words"),
    ("CDPATH", "it changes which directory cd enters"),
    ("FPATH", "ksh and zsh load functions from it"),
    ("ZDOTDIR", "zsh reads its startup files from it"),
    ("INPUTRC", "readline reads its configuration from it"),
    ("SHELL", _PROGRAM),
    # Interpreters and their package managers.
    ("PYTHON*", "Python takes its module path, startup file, home or options from it"),
    ("_PYTHON*", "Python's sysconfig imports the module _PYTHON_SYSCONFIGDATA_NAME names, even under -I"),
    ("PERL*", "perl loads modules, options or a debugger from it (PERL5OPT, PERL5LIB, PERL5DB)"),
    ("RUBY*", "ruby loads libraries or options from it (RUBYOPT, RUBYLIB)"),
    ("GEM_*", "rubygems loads gems from it"),
    ("BUNDLE_*", "bundler is configured from it"),
    ("NODE_*", "node loads modules or options from it (NODE_OPTIONS, NODE_PATH)"),
    ("NPM_CONFIG_*", "npm is configured from it"),
    ("JAVA_*", "the JVM takes options from it (JAVA_TOOL_OPTIONS) or is chosen by it (JAVA_HOME)"),
    ("_JAVA_OPTIONS", "the JVM takes options from it, -javaagent included"),
    ("JDK_JAVA_OPTIONS", "the java launcher takes options from it, -javaagent included"),
    ("CLASSPATH", "the JVM loads classes from it"),
    ("MAVEN_OPTS", "the JVM of Maven takes options from it"),
    ("GRADLE_OPTS", "the JVM of Gradle takes options from it"),
    ("LUA_*", "lua runs LUA_INIT* and loads modules from LUA_PATH* / LUA_CPATH*"),
    ("TCLLIBPATH", "tcl loads packages from it"),
    ("TCL_LIBRARY", "tcl loads its library from it"),
    ("TK_LIBRARY", "tk loads its library from it"),
    ("PHPRC", "php reads its configuration from it"),
    ("PHP_INI_SCAN_DIR", "php reads its configuration from it"),
    ("R_LIBS*", "R loads packages from it"),
    ("R_PROFILE*", "R runs the profile it names"),
    ("R_ENVIRON*", "R reads its environment file from it"),
    ("ERL_*", "the Erlang VM takes options or libraries from it"),
    ("GOFLAGS", "go takes options from it"),
    ("GOROOT", "it chooses the go toolchain"),
    ("GOPATH", "go loads modules from it"),
    ("GOTOOLCHAIN", "go downloads and runs the toolchain it names"),
    ("GOENV", "go reads its configuration from it"),
    ("GOPROXY", "go downloads modules from it"),
    ("CARGO_*", "cargo is configured from it"),
    ("RUSTC*", "cargo runs the compiler or wrapper it names (RUSTC_WRAPPER)"),
    ("RUSTDOC*", "cargo runs the documentation tool it names"),
    ("RUSTFLAGS", "the Rust compiler takes options from it"),
    ("RUSTUP_*", "rustup chooses the toolchain from it"),
    ("PIP_*", "pip is configured from it (index, configuration file)"),
    # Build and version-control tools.
    ("GIT_*", "git reads configuration (GIT_CONFIG_*), runs programs (GIT_EXEC_PATH, GIT_SSH_COMMAND) or opens another repository from it"),
    ("HGRCPATH", "mercurial reads configuration, hooks included, from it"),
    ("CONFIG_SITE", "configure scripts source the file it names"),
    ("MAKEFILES", "make reads the makefiles it names first"),
    ("MAKEFLAGS", "make takes options from it, --eval included"),
    ("MFLAGS", "make takes options from it"),
    ("GNUMAKEFLAGS", "make takes options from it"),
    ("PKG_CONFIG_*", "pkg-config reads package descriptions from it"),
    ("CCACHE_*", "ccache reuses objects from or runs a prefix command named by it"),
    ("EDITOR", _PROGRAM),
    ("VISUAL", _PROGRAM),
    ("PAGER", _PROGRAM),
    ("MANPAGER", _PROGRAM),
    ("BROWSER", _PROGRAM),
    ("SSH_ASKPASS", _PROGRAM),
    ("SUDO_ASKPASS", _PROGRAM),
    ("LESSOPEN", "less runs the input preprocessor it names"),
    ("LESSCLOSE", "less runs the postprocessor it names"),
    # Trust and terminal configuration.
    ("OPENSSL_*", "OpenSSL loads its configuration, engines or providers (shared objects) from it"),
    ("SSL_CERT_FILE", _TRUST),
    ("SSL_CERT_DIR", _TRUST),
    ("CURL_CA_BUNDLE", _TRUST),
    ("REQUESTS_CA_BUNDLE", _TRUST),
    ("GNUPGHOME", _TRUST),
    ("TERMINFO*", "curses parses terminal descriptions from it"),
    ("TERMCAP", "curses parses terminal descriptions from it"),
    ("SSLKEYLOGFILE", "TLS libraries write session keys to the file it names"),
    # Found by the attack review: each of these loads code or configuration too.
    ("TAR_OPTIONS", "GNU tar takes options from it, --checkpoint-action=exec included"),
    ("PYTEST_*", "pytest takes options and plugins from it (PYTEST_ADDOPTS, PYTEST_PLUGINS)"),
    ("SYSTEMD_*", "systemd tools run the pager or editor it names, or read configuration from it"),
    ("LIBMOUNT_*", "mount(8) reads fstab and mtab from the files it names"),
    ("CC", _PROGRAM),
    ("CXX", _PROGRAM),
    ("CPP", _PROGRAM),
    ("LD", _PROGRAM),
    ("AR", _PROGRAM),
    ("CFLAGS", "compilers take options from it (-fplugin=, -B)"),
    ("CXXFLAGS", "compilers take options from it (-fplugin=, -B)"),
    ("CPPFLAGS", "compilers take options from it"),
    ("LDFLAGS", "the linker takes options from it"),
    ("AWKPATH", "awk loads source files from it"),
    ("AWKLIBPATH", "gawk loads extensions (shared objects) from it"),
    ("CORECLR_*", ".NET loads the profiler it names"),
    ("COR_*", ".NET loads the profiler it names"),
    ("DOTNET_*", ".NET is configured from it, startup hooks included"),
    ("GTK_*", "GTK loads modules from it"),
    ("QT_*", "Qt loads plugins from it"),
    ("GST_*", "GStreamer loads plugins from it"),
    ("KUBECONFIG", "kubectl reads credentials and exec plugins from the file it names"),
    ("AWS_*", "the AWS tools read configuration, credential processes included, from it"),
    ("UV_*", "uv is configured from it (index, Python, configuration file)"),
    ("CONDA_*", "conda is configured from it"),
    ("VIRTUAL_ENV", "tools pick the environment it names"),
    ("DOCKER_*", "docker talks to the daemon or reads the configuration it names"),
    ("GCC_EXEC_PREFIX", "gcc runs its subprograms from it"),
    ("COMPILER_PATH", "gcc runs its subprograms from it"),
    ("LIBRARY_PATH", "the linker links libraries from it"),
    ("PROFILE*", "shells or tools run the profile it names"),
)
_REFUSED_EXACT = {pattern: why for pattern, why in REFUSED_ENV if not pattern.endswith("*")}
_REFUSED_PREFIXES = tuple((pattern[:-1], why) for pattern, why in REFUSED_ENV if pattern.endswith("*"))


def check_env_name(name: str) -> tuple[FreezeCode, str] | None:
    """Why the caller may not pass or set ``name`` for an exec'd command, or None if it may.

    ``BAD_EXEC_ENV``: not a variable name, or one exec sets itself (:data:`FIXED_NAMES`,
    ``ATTEST_*``). ``ENV_REFUSED``: a name that makes some program load code or configuration
    from outside the images (:data:`REFUSED_ENV`).
    """
    if not _ENV_NAME.match(name):
        return FreezeCode.BAD_EXEC_ENV, "not an environment variable name"
    fixed = FIXED_NAMES.get(name)
    if fixed is None and name.startswith("ATTEST_"):
        fixed = "attest exec sets the ATTEST_* variables itself"
    if fixed is not None:
        return FreezeCode.BAD_EXEC_ENV, f"this variable is fixed by attest exec and cannot be overridden: {fixed}"
    folded = name.upper()
    why = _REFUSED_EXACT.get(folded)
    if why is None:
        why = next((w for prefix, w in _REFUSED_PREFIXES if folded.startswith(prefix)), None)
    if why is not None:
        return FreezeCode.ENV_REFUSED, f"this variable is never passed to the command: {why}"
    return None


def caller_environment(
    pass_env: Sequence[str], set_env: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    """The variables the caller names, each one allowed by :func:`check_env_name`; raise naming every refusal.

    ``pass_env`` names are copied from ``environ`` when set there; ``set_env`` gives values.
    """
    findings: list[Finding] = []
    out: dict[str, str] = {}
    for var in pass_env:
        if var in set_env:
            findings.append(Finding(FreezeCode.BAD_EXEC_ENV, var, "this variable is both passed through and set"))
    for var, value in [*((v, environ.get(v)) for v in pass_env), *set_env.items()]:
        problem = check_env_name(var)
        if problem is not None:
            findings.append(Finding(problem[0], var, problem[1]))
        elif value is not None and "\0" in value:
            findings.append(Finding(FreezeCode.BAD_EXEC_ENV, var, "the value contains a NUL byte"))
        elif value is not None:
            out[var] = value
    if findings:
        raise InputError(findings=findings)
    return out


_IMAGE_REF = re.compile(r"\$(?:\{ATTEST_IMAGE_(?P<braced>[A-Za-z0-9_]+)\}|ATTEST_IMAGE_(?P<bare>[A-Za-z0-9_]+))(?P<rest>/.*)?\Z", re.S)


#: ``(argv, images, run_dir, cwd) -> (argv, descriptors to pass)``: see :func:`run_from_images`.
Confine = Callable[[Sequence[str], Mapping[str, Image], str, str], tuple[list[str], Sequence[int]]]


def expand_image_refs(argv: Sequence[str], paths: Mapping[str, str]) -> list[str]:
    """``argv`` with a leading ``$ATTEST_IMAGE_<NAME>`` (or ``${ATTEST_IMAGE_<NAME>}``) replaced by that image's path (pure).

    The way to name a program or file inside an image without a shell: an argument that is
    exactly the reference, or the reference followed by ``/...``, becomes the image path (plus
    the rest). ``paths`` maps upper-cased image names to paths. A reference to an image that was
    not given, or a rest with an empty, ``.`` or ``..`` component (which could leave the image),
    is ``BAD_IMAGE_REF``: the literal text is never run. Anything else is unchanged.

    Raises:
        InputError: ``BAD_IMAGE_REF``.
    """
    out: list[str] = []
    for arg in argv:
        m = _IMAGE_REF.match(arg)
        if m is None:
            out.append(arg)
            continue
        name = m.group("braced") or m.group("bare")
        if name not in paths:
            raise InputError(FreezeCode.BAD_IMAGE_REF, f"no image is named {name} (given: {', '.join(sorted(paths)) or 'none'})", arg)
        rest = m.group("rest") or ""
        if rest and any(part in ("", ".", "..") for part in rest[1:].split("/")):
            raise InputError(FreezeCode.BAD_IMAGE_REF, "a path inside an image has no empty, '.' or '..' component", arg)
        out.append(paths[name] + rest)
    return out


def _take(store: Store, ref: str | Image) -> Image:
    """The image ``ref`` names after :meth:`Store.get`; a verified :class:`Image` after its seal check.

    An Image without the mark Store.get and freeze_tree set (one read from a record, or made by
    hand) is verified in full, as a reference is.
    """
    if not isinstance(ref, Image):
        return store.get(ref)
    if ref.verified is not VERIFIED:
        return store.get(ref.path)
    if ref.path != store.tree_path(ref.hex):
        raise VerificationError(FreezeCode.NOT_IN_STORE, f"not an image of the store under {store.state_dir}", ref.path)
    problems = check_image(ref)
    if problems:
        raise VerificationError(findings=problems)
    return ref


def run_from_images(
    state_dir: str | os.PathLike[str],
    images: Mapping[str, str | Image],
    argv: Sequence[str],
    *,
    cwd_image: str | None = None,
    pass_env: Sequence[str] = (),
    set_env: Mapping[str, str] | None = None,
    now: float | None = None,
    stdout: int | None = None,
    before: Callable[[Mapping[str, Image]], None] | None = None,
    confine: Confine | None = None,
    attest_env: Mapping[str, str] | None = None,
) -> int:
    """Run ``argv`` with the named images (identity or store path each); return its exit status.

    ``attest_env``: variables attest itself sets for the command (``ATTEST_REVIEW_SEMANTIC``, ...),
    never a caller's: only names starting ``ATTEST_`` and not the ones this function fixes.

    A reference is verified with :meth:`Store.get` (seal, every byte, seal). An :class:`Image`
    instead of a reference is one the caller took with :meth:`Store.get` of this store for the
    same use, moments before (``attest bootstrap`` verifies the runtime in step 5 and runs it in
    step 6): its bytes were verified after the seal it was taken with, so only that seal is
    checked again, against the image's own in-memory snapshot (flags, inode, change time of
    every entry): anything that broke and re-made the seal since moved a change time.

    ``stdout``: a file descriptor the command's standard output goes to (the caller's own
    standard output when None). It changes nothing else: the same images, environment, checks.
    ``before``: called with the verified images (under the store's shared lock, after step 1,
    before anything runs) so a caller can require more of them; whatever it raises stops the run.
    ``confine``: wraps the command (``(argv, images, run_dir, cwd) -> (argv, descriptors to
    pass)``), for a caller that runs it in a confinement of its own (the review step does);
    the descriptors are closed after the command. The backends' own wrapping is then not used,
    and the command holds nothing of the caller's session (:mod:`attest._session`): a new
    session (no controlling terminal), stdin ``/dev/null``, its stderr (and stdout when
    ``stdout`` is None) through pipes relayed to attest's own, a new, empty session keyring and
    the keyring system calls refused. Interrupting attest (Ctrl-C) kills it.

    Raises:
        InputError: ``BAD_EXEC_ENV`` (no command, a bad ``stdout``, a variable both passed and
            set or holding a NUL), ``ENV_REFUSED``, ``BAD_IMAGE_REF`` (no image, a malformed or
            colliding name, ``cwd_image`` not among them, a bad ``$ATTEST_IMAGE_`` reference),
            ``COMMAND_NOT_FOUND`` / ``COMMAND_NOT_EXECUTABLE`` / ``EXEC_FAILED`` (the command
            cannot be started: not found, found but not executable, another reason).
        VerificationError: ``NOT_IN_STORE`` and the codes of :func:`verify_image` for an image
            that does not hold before the run, ``HOST_LIBRARY_CHANGED`` for a runtime image whose
            recorded host libraries changed, ``IMAGE_CHANGED_DURING_EXEC`` after it,
            ``STATE_SYMLINK`` (a link or non-directory planted in the state
            directory); whatever ``before`` raises.
        EnvironmentFailure: ``BACKEND_UNAVAILABLE``, ``STATE_INSECURE``, ``STAGING_FAILED``.
    """
    env = _check_request(images, argv, cwd_image=cwd_image, stdout=stdout, pass_env=pass_env, set_env=set_env,
                         attest_env=attest_env)
    store = Store(state_dir)
    state_fd = open_state(store.state_dir, create=False)
    try:
        with state_lock(state_fd, exclusive=False):
            # (1) Only verified store entries whose seal holds.
            resolved: dict[str, Image] = {name: _take(store, ref) for name, ref in images.items()}
            # (1b) A runtime image's interpreter loads the host libraries it recorded, and only those bytes.
            host = [f for image in resolved.values() for f in verify_host_libraries(image)]
            if host:
                raise VerificationError(findings=host)
            if before is not None:
                before(resolved)
            runs_fd = open_sub(state_fd, "runs", f"{store.state_dir}/runs")
            run_name = random_name("run")
            run_dir = f"{store.state_dir}/runs/{run_name}"
            run_fd = make_private_dir(runs_fd, run_name, run_dir)
            try:
                for sub in ("home", "tmp", "cache", "config", "data", "pycache"):
                    os.mkdir(sub, 0o700, dir_fd=run_fd)
                os.close(run_fd)
                full = _run_environment(env, run_dir, resolved, attest_env or {})
                cwd = resolved[cwd_image].path if cwd_image is not None else f"{run_dir}/home"
                command, passed, status = _confined(argv, resolved, confine, runs_fd, run_dir, cwd)
                try:
                    returncode = _run(command, argv[0], env=full, cwd=cwd, stdout=stdout, passed=passed, confined=confine is not None)
                finally:
                    failed = _wrapper_failure(status)
                if failed:
                    raise EnvironmentFailure(FreezeCode.BACKEND_UNAVAILABLE, f"the erofs images cannot be mounted for the command: {failed}")
                # (4) The images must still be exactly what was sealed.
                _check_after(resolved)
                for image in resolved.values():
                    store.touch_use(state_fd, image.hex, time.time() if now is None else now)
            finally:
                remove_tree(runs_fd, run_name)
                os.close(runs_fd)
    finally:
        os.close(state_fd)
    return 128 - returncode if returncode < 0 else returncode


def _check_request(images: Mapping[str, str | Image], argv: Sequence[str], *, cwd_image: str | None, stdout: int | None,
                   pass_env: Sequence[str], set_env: Mapping[str, str] | None,
                   attest_env: Mapping[str, str] | None) -> dict[str, str]:
    """Refuse, before anything is opened, a request :func:`run_from_images` cannot carry out as asked.

    Returns the caller's variables the command gets (:func:`caller_environment`).
    """
    if stdout is not None and (isinstance(stdout, bool) or not isinstance(stdout, int) or stdout < 0):
        raise InputError(FreezeCode.BAD_EXEC_ENV, "stdout must be an open file descriptor")
    if not argv:
        raise InputError(FreezeCode.BAD_EXEC_ENV, "no command to run")
    if not images:
        raise InputError(FreezeCode.BAD_IMAGE_REF, "at least one --image NAME=PATH is required")
    seen: dict[str, str] = {}
    for name in images:
        if not _NAME.match(name):
            raise InputError(FreezeCode.BAD_IMAGE_REF, "an image name is a letter followed by letters, digits or '_'", name)
        if name.upper() in seen:
            raise InputError(FreezeCode.BAD_IMAGE_REF, f"the image names {seen[name.upper()]!r} and {name!r} collide", name)
        seen[name.upper()] = name
    if cwd_image is not None and cwd_image not in images:
        raise InputError(FreezeCode.BAD_IMAGE_REF, "--cwd must name one of the --image names", cwd_image)
    env = caller_environment(pass_env, set_env or {}, os.environ)
    for name in attest_env or {}:
        if not name.startswith("ATTEST_") or name.startswith("ATTEST_IMAGE_") or name == "ATTEST_RUN_DIR":
            raise InputError(FreezeCode.BAD_EXEC_ENV, "attest's own variables start with ATTEST_ and are not an image's or the run's",
                             name)
    return env


def _run_environment(env: Mapping[str, str], run_dir: str, resolved: Mapping[str, Image], attest_env: Mapping[str, str]) -> dict[str, str]:
    """(2) Allowlisted environment, caches and temp outside every image.

    The fixed variables come last, so they win even over a name check_env_name missed.
    """
    full = {
        **env,
        "PATH": DEFAULT_PATH,
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "HOME": f"{run_dir}/home",
        "TMPDIR": f"{run_dir}/tmp",
        "XDG_CACHE_HOME": f"{run_dir}/cache",
        "XDG_CONFIG_HOME": f"{run_dir}/config",
        "XDG_DATA_HOME": f"{run_dir}/data",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONPYCACHEPREFIX": f"{run_dir}/pycache",
        "ATTEST_RUN_DIR": run_dir,
    }
    for name, image in resolved.items():
        full[f"ATTEST_IMAGE_{name.upper()}"] = image.path
    full.update(attest_env)
    return full


def _confined(argv: Sequence[str], resolved: Mapping[str, Image], confine: Confine | None, runs_fd: int, run_dir: str,
              cwd: str) -> tuple[list[str], Sequence[int], int | None]:
    """(3) The command, confined by the caller's ``confine`` or through the backend of any image that needs it (ro-bind, erofs).

    Also returns the read end of the erofs wrapper's status pipe (None without erofs images).
    """
    command = expand_image_refs(argv, {name.upper(): image.path for name, image in resolved.items()})
    erofs = [name for name, image in resolved.items() if image.erofs is not None]
    if confine is not None:
        if erofs:
            raise VerificationError(FreezeCode.EROFS_UNSUPPORTED,
                                    f"a confined command cannot be given an erofs image yet ({', '.join(sorted(erofs))}); freeze it with another backend",
                                    resolved[sorted(erofs)[0]].path)
        wrapped, passed = confine(command, resolved, run_dir, cwd)
        return wrapped, passed, None
    if erofs:
        return _erofs_wrapped(command, resolved, cwd)
    for backend_name in sorted({i.backend for i in resolved.values()}):
        backend = BACKENDS[backend_name]
        wrapped = backend.wrap(command, [i.path for i in resolved.values()], cwd)
        if wrapped != command:
            backend.probe(runs_fd, run_dir)
            return wrapped, (), None
    return command, (), None


def _erofs_wrapped(command: list[str], resolved: Mapping[str, Image], cwd: str) -> tuple[list[str], Sequence[int], int | None]:
    """The command in its own mount namespace: every erofs image mounted from the descriptor of its checked file, ro-bind images bound read-only."""
    fds: list[int] = []
    try:
        mounts: list[tuple[str, str, str]] = []
        for image in resolved.values():
            if image.erofs is not None:
                fd = open_checked_image_file(image)
                fds.append(fd)
                mounts.append(("erofs", str(fd), image.path))
            elif BACKENDS[image.backend].wrap(["true"], [image.path], None) != ["true"]:
                mounts.append(("bind", image.path, image.path))  # ro-bind: the same read-only bind its own wrapper makes
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return wrap_command(command, mounts, cwd, write_end), (*fds, write_end), read_end


def _wrapper_failure(status: int | None) -> str:
    """What the erofs wrapper reported before it ran the command ("" if it ran it, or there was none); closes ``status``."""
    if status is None:
        return ""
    try:
        return b"".join(iter(lambda: os.read(status, 4096), b"")).decode(errors="replace")
    finally:
        os.close(status)


def _run(command: Sequence[str], name: str, *, env: Mapping[str, str], cwd: str, stdout: int | None, passed: Sequence[int],
         confined: bool) -> int:
    """Run ``command`` to its end; its return code. ``passed`` are closed after it, whatever happened."""
    try:
        if confined:
            # Confined: nothing of the caller's session (its terminal, its keyrings).
            proc = start(command, env=env, cwd=cwd, stdout=stdout, pass_fds=passed, deny_keyrings=True)
            return relay(proc)
        return subprocess.run(command, env=env, cwd=cwd, close_fds=True, pass_fds=tuple(passed), check=False,
                              stdout=stdout).returncode
    except OSError as e:
        code = {errno.ENOENT: FreezeCode.COMMAND_NOT_FOUND, errno.ENOTDIR: FreezeCode.COMMAND_NOT_FOUND,
                errno.EACCES: FreezeCode.COMMAND_NOT_EXECUTABLE, errno.ENOEXEC: FreezeCode.COMMAND_NOT_EXECUTABLE,
                errno.EISDIR: FreezeCode.COMMAND_NOT_EXECUTABLE}.get(e.errno or 0, FreezeCode.EXEC_FAILED)
        raise InputError(code, f"cannot run the command: {e.strerror}", name) from e
    finally:
        for fd in passed:
            os.close(fd)


def _check_after(resolved: Mapping[str, Image]) -> None:
    """(4) Every image is still exactly what was sealed, or the command's result is not trusted."""
    for name, image in resolved.items():
        problems = check_image(image)
        if problems:
            raise VerificationError(
                FreezeCode.IMAGE_CHANGED_DURING_EXEC,
                f"image {name!r} changed while the command ran; its result is not trusted",
                image.path,
                findings=problems,
            )
