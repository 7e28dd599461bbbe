"""A real agent CLI for the tests: the pinned ``codex`` native binary, fetched once, and how to run it offline.

**What it is.** ``@openai/codex`` on the npm registry is a 4.9 kB node launcher
(``bin/codex.js``) whose platform builds are versions of the *same* package name
(``@openai/codex@0.171.0-linux-x64``, aliased by the launcher's optionalDependencies as
``@openai/codex-linux-x64``). The build holds ``vendor/<triple>/bin/codex``, a **static-pie musl
executable** that runs on its own: no node, no shared library, nothing of ``/etc``. The launcher
only execs it (setting ``CODEX_MANAGED_BY_NPM``/``CODEX_MANAGED_PACKAGE_ROOT``, which the binary
does not need). :func:`fetch_codex` keeps just ``bin/codex`` and ``codex-resources/bwrap`` (the
bundled bubblewrap that ``--sandbox read-only`` starts for a tool command, found next to the
binary) of the 172 MB tarball: 316 MB on disk, verified against the pinned ``dist.integrity``
(sha512 of the tarball) and the pinned sha256 of the two files.

**How it runs** (:func:`codex_command`): ``codex exec`` with a custom provider on
``http://127.0.0.1:PORT/v1`` speaking the Responses API (``support.fake_model`` serves it), every
network-reaching feature off (plugins: a ``git ls-remote`` at start-up; analytics: two hosts
retried after the answer; web search), the shell, multi-agent and goal tools off, ``--ephemeral``,
standard input ``/dev/null`` (it waits for EOF otherwise), always under a timeout (it retries a
dead endpoint forever). Its standard output is exactly the model's final message. No API key is
needed: a provider without ``env_key`` sends no ``Authorization`` header.

**Inside attest's confinement** (the reviewer's: its own network namespace, no capabilities,
no_new_privs, chrooted): codex runs there as is, as root's step uid or rootless, but

- its ``--sandbox read-only`` bubblewrap cannot start there (``bwrap: No permissions to create a
  new namespace``: a chrooted process may not create a user namespace); only a tool command
  would start it, and the switches here leave none, but :func:`codex_command` passes
  ``--sandbox danger-full-access`` so that confinement is attest's alone;
- the namespace's ``lo``: attest brings it up before the reviewer starts, where the host has
  ``ip`` (``attest.builder._sandbox.loopback_tool``; the record says ``"network": "loopback"``), so
  the reviewer serves and reaches its own 127.0.0.1, never the host's. A reviewer image then
  carries the fake itself: :func:`review_script` is the ``bin/review`` that starts
  ``fake_model.py`` with the runtime image's interpreter and execs ``attest review agent -- codex
  exec ...`` (tests/review/test_real_agent_cli.py runs it through ``just verify``). Without
  ``ip`` the loopback stays **down** and a process without CAP_NET_ADMIN cannot bring it up
  (``connect(127.0.0.1)`` fails with ENETUNREACH): then :class:`NetnsFake` (the test, from
  outside, joins the namespace of the confined process whose command line carries a nonce,
  brings ``lo`` up and serves there on :data:`CONFINED_PORT`) with :func:`wait_for_port_argv`
  wrapping the agent so that it starts only once the fake listens. The alternative is attest's
  ``network=True`` (the reviewer shares the host's network): then an in-process
  :class:`~support.fake_model.FakeModel` on the test's 127.0.0.1 is reached directly.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import platform
import secrets
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .fake_model import REQUEST_LINE  # the prefix of each request line the fake echoes (``--echo-requests``)

__all__ = [
    "CODEX",
    "CONFINED_PORT",
    "REQUEST_LINE",
    "CodexUnavailable",
    "NetnsFake",
    "Pin",
    "cache_root",
    "codex_argv",
    "codex_command",
    "fetch_codex",
    "provider_config",
    "review_script",
    "wait_for_port_argv",
]


class CodexUnavailable(RuntimeError):
    """The pinned codex cannot be fetched here (no npm, the registry unreachable): a reason to skip, never a hash mismatch."""


@dataclass(frozen=True)
class Pin:
    """One registry package version: what to ask for, what its tarball must hash to, what to keep of it."""

    name: str  # the registry name
    version: str  # the exact version (a platform build of codex is a version of the same name)
    integrity: str  # the registry's dist.integrity: "sha512-" + base64 of the tarball's SHA-512
    prefix: str  # the tarball's directory that holds the files kept
    files: Mapping[str, str | None]  # kept files, relative to prefix -> their sha256 (None: not pinned)
    entry: str  # the runnable file, relative to the kept directory

    @property
    def tarball_name(self) -> str:  # the registry's tarball file name for a scoped name
        return f"{self.name.rsplit('/', 1)[-1]}-{self.version}.tgz"

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


CODEX_VERSION = "0.171.0"
#: The launcher package (not needed: it only execs the native binary), recorded for reference.
CODEX_LAUNCHER_INTEGRITY = "sha512-1IOFzL2Xg86tLdw6kDo3GoKbkQENgQi7TI6rlEvN132R7ngSw7SNOIQoTcnKzSZZ8kf9N9GynCweSoaFbqk2Eg=="
_KEEP = ("bin/codex", "codex-resources/bwrap")
#: The native build for each machine (os.uname().machine).
CODEX: Mapping[str, Pin] = {
    "x86_64": Pin("@openai/codex", f"{CODEX_VERSION}-linux-x64",
                  "sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw==",
                  "package/vendor/x86_64-unknown-linux-musl",
                  {"bin/codex": "b76a027d6b210f9a8da7aaf321dd235c700f0ef7a794d4a5314b9af6c134f0f0",
                   "codex-resources/bwrap": "91a245ea678a7ae642f383a22576c3c476d0d6d3e2321a553f3ed8d4d487ed74"},
                  "bin/codex"),
    "aarch64": Pin("@openai/codex", f"{CODEX_VERSION}-linux-arm64",
                   "sha512-9z17t4bbUJ9UCIb49O4PoA+ki+45q3rd8nZ8PeH6sYnlKkBld/Xpo/OS3h3Ti954+foshX4o7k5TCU8N7zzqQA==",
                   "package/vendor/aarch64-unknown-linux-musl", dict.fromkeys(_KEEP), "bin/codex"),
}

#: The port the fake listens on inside a confined agent's own network namespace (nothing else is there).
CONFINED_PORT = 18080
FAKE_MODEL_SCRIPT = str(Path(__file__).with_name("fake_model.py"))


def cache_root() -> Path:
    """Where fetched CLIs and wheels are kept across test sessions: ``$ATTEST_TEST_CACHE``, else ``~/.cache/attest-tests``
    where it can be made, else ``.test-cache`` in this checkout (for a user without a writable home, such as the
    system's ``nobody``, whose home is /nonexistent)."""
    env = os.environ.get("ATTEST_TEST_CACHE")
    if env:
        return Path(env)
    home = Path.home() / ".cache" / "attest-tests"
    return home if _can_make(home) else Path(__file__).resolve().parents[2] / ".test-cache"


def _can_make(path: Path) -> bool:
    """Whether ``path`` exists or can be created by this user: its nearest existing ancestor is writable."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return os.access(path, os.W_OK | os.X_OK)


def _integrity(path: Path) -> str:
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha512-" + base64.b64encode(h.digest()).decode()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _npm() -> str | None:
    return shutil.which("npm") or next((p for p in ("/usr/bin/npm", "/usr/local/bin/npm") if os.access(p, os.X_OK)), None)


def download_tarball(pin: Pin, dest: Path, *, registry: str | None, timeout: float,
                     unavailable: type[Exception] = CodexUnavailable) -> Path:
    """``pin``'s tarball into ``dest``: over HTTP from ``registry`` when given, else with ``npm pack`` (not yet checked).

    Every "cannot fetch" is ``unavailable`` (the caller's skip reason), never another exception.
    """
    if registry:
        return _download_http(pin, dest, registry, timeout, unavailable)
    return _download_npm(pin, dest, timeout, unavailable)


def _download_npm(pin: Pin, dest: Path, timeout: float, unavailable: type[Exception]) -> Path:
    """``npm pack SPEC`` into ``dest`` (the ordinary client: its registry, proxy and cache settings)."""
    npm = _npm()
    if npm is None:
        raise unavailable("npm is not installed: set ATTEST_TEST_NPM_REGISTRY to fetch over HTTP instead")
    try:
        # npm keeps its cache in ~/.npm; a user without a writable home gets one in the test cache instead
        cache = () if _can_make(Path.home() / ".npm") else ("--cache", str(cache_root() / "npm"))
        out = subprocess.run([npm, "pack", pin.spec, "--pack-destination", str(dest), "--json", "--silent", *cache],
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False, cwd=dest)
    except subprocess.TimeoutExpired as e:
        raise unavailable(f"npm pack {pin.spec} did not finish in {timeout}s") from e
    if out.returncode != 0:
        raise unavailable(f"npm pack {pin.spec} failed ({out.returncode}): {out.stderr.decode(errors='replace')[-2000:]}")
    name = str(json.loads(out.stdout)[0]["filename"])
    return dest / name


def _download_http(pin: Pin, dest: Path, registry: str, timeout: float, unavailable: type[Exception]) -> Path:
    """GET REGISTRY/NAME/-/TARBALL with urllib (no npm needed)."""
    url = f"{registry.rstrip('/')}/{pin.name}/-/{pin.tarball_name}"
    path = dest / pin.tarball_name
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r, open(path, "wb") as f:
            shutil.copyfileobj(r, f, 1 << 20)
    except OSError as e:  # urllib.error.URLError is one
        raise unavailable(f"cannot download {url}: {e}") from e
    return path


def fetch_codex(cache_dir: str | os.PathLike[str] | None = None, *, machine: str | None = None, timeout: float = 600,
                registry: str | None = None, tarball: str | os.PathLike[str] | None = None) -> str:
    """The path of the pinned, verified ``codex`` binary, fetched into ``cache_dir`` the first time.

    ``cache_dir`` (default :func:`cache_root`) gets ``codex-VERSION/`` holding ``bin/codex`` and
    ``codex-resources/bwrap`` (directories 0755, files 0755: readable by a confinement's other
    uid, bindable read-only as the "reviewer image"). Concurrent callers (pytest-xdist workers)
    serialize on a lock file; a complete copy is marked by ``.complete`` (the integrity and the
    kept files' sizes, re-checked on every call; the hashes only when fetched). The tarball comes from
    ``tarball`` (a local file), else over HTTP from ``registry`` (or ``$ATTEST_TEST_NPM_REGISTRY``),
    else through ``npm pack``; it is used only when its SHA-512 is the pinned ``dist.integrity``,
    and each kept file only when its SHA-256 is the pinned one.

    Raises:
        CodexUnavailable: no build is pinned for this machine, npm is missing or failed, the download
            failed (the registry is unreachable): a caller may skip.
        RuntimeError: a hash differs (never skip that).
        OSError: the cache cannot be written.
    """
    pin = CODEX.get(machine or platform.machine())
    if pin is None:
        raise CodexUnavailable(f"no codex build is pinned for {machine or platform.machine()}")
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"codex-{pin.version}"
    entry = target / pin.entry
    if _complete(target, pin):  # the common case, without the lock (a cache another user filled)
        return str(entry)
    with open(root / f".codex-{pin.version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target, pin):
            return str(entry)
        if target.exists():
            shutil.rmtree(target)
        work = Path(tempfile.mkdtemp(prefix=f".codex-{pin.version}-", dir=root))
        try:
            if tarball is not None:
                tgz = Path(tarball)
            else:
                registry = registry or os.environ.get("ATTEST_TEST_NPM_REGISTRY")
                tgz = download_tarball(pin, work, registry=registry, timeout=timeout)
            got = _integrity(tgz)
            if got != pin.integrity:
                raise RuntimeError(f"{pin.spec}: the tarball's integrity is {got}, pinned {pin.integrity}")
            tree = work / "tree"
            _extract(tgz, pin, tree)
            for rel, want in pin.files.items():
                if want is not None and _sha256(tree / rel) != want:
                    raise RuntimeError(f"{pin.spec}: {rel} does not have the pinned sha256 {want}")
            (tree / ".complete").write_text(json.dumps({"spec": pin.spec, "integrity": pin.integrity,
                                                        "sizes": {r: (tree / r).stat().st_size for r in pin.files}}))
            os.chmod(tree, 0o755)
            os.rename(tree, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return str(entry)


def _complete(target: Path, pin: Pin) -> bool:
    try:
        mark = json.loads((target / ".complete").read_text())
        return mark.get("integrity") == pin.integrity and all(
            (target / r).stat().st_size == n for r, n in mark["sizes"].items()) and set(mark["sizes"]) == set(pin.files)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _extract(tgz: Path, pin: Pin, tree: Path) -> None:
    wanted = {f"{pin.prefix}/{rel}": rel for rel in pin.files}
    tree.mkdir(mode=0o755)
    with tarfile.open(tgz, "r|gz") as tar:  # a stream: stop once every kept file is out
        for member in tar:
            rel = wanted.pop(member.name, None)
            if rel is None:
                continue
            if not member.isreg():
                raise RuntimeError(f"{pin.spec}: {member.name} is not a regular file")
            out = tree / rel
            out.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            src = tar.extractfile(member)
            assert src is not None
            with open(out, "wb") as f:
                shutil.copyfileobj(src, f, 1 << 20)
            os.chmod(out, 0o755)
            if not wanted:
                break
    if wanted:
        raise RuntimeError(f"{pin.spec}: the tarball lacks {sorted(wanted)}")


def provider_config(base_url: str) -> str:
    """The ``model_providers.fake`` table (TOML inline) of a Responses API endpoint at ``base_url``, with no retry."""
    return (f'{{name="fake",base_url="{base_url}",wire_api="responses",'
            'request_max_retries=0,stream_max_retries=0}')


def codex_argv(binary: str, prompt: str, *, port: int, last_message: str | None = None, json_events: bool = False,
               sandbox: str = "danger-full-access", model: str = "fake-model", host: str = "127.0.0.1",
               base_url: str | None = None) -> list[str]:
    """The exact ``codex exec`` command line of one offline, tool-less, non-interactive turn against the fake.

    ``sandbox``: ``danger-full-access`` (default: confinement is the caller's; codex's own
    ``read-only`` bubblewrap cannot start inside attest's confinement). ``last_message``: also
    write the final message to this file (``-o``). ``json_events``: JSONL events on stdout
    (``--json``) instead of the bare final message. ``base_url`` (instead of ``host`` and
    ``port``): the endpoint, verbatim.
    """
    provider = provider_config(base_url if base_url is not None else f"http://{host}:{port}/v1")
    argv = [binary, "exec",
            "-c", "model_provider=fake", "-m", model, "-c", f"model_providers.fake={provider}",
            "-c", "analytics.enabled=false", "-c", "web_search=disabled",
            "--disable", "plugins", "--disable", "shell_tool", "--disable", "multi_agent", "--disable", "goals",
            "--sandbox", sandbox, "--ephemeral", "--skip-git-repo-check", "--color", "never"]
    if last_message is not None:
        argv += ["-o", last_message]
    if json_events:
        argv.append("--json")
    return [*argv, "--", prompt]


_CODEX_WORD, _PORT_WORD = "@CODEX@", "@PORT@"


def review_script(*, timeout: int = 120, start_timeout: int = 30, host: str = "127.0.0.1") -> str:
    """The ``bin/review`` (a ``/bin/sh`` script) of a reviewer image holding ``bin/codex``, ``fake_model.py`` and answers.

    Run by ``attest review exec --reviewer IMAGE`` inside the confinement (its own network
    namespace, whose ``lo`` attest brings up: ``"network": "loopback"``), it starts the fake model
    on ``host`` (the confinement's own 127.0.0.1, port 0: any free one) with the runtime image's
    interpreter (``$ATTEST_IMAGE_RUNTIME/bin/python -I -B``), its standard output on standard
    error (only the result may reach standard output) and each request echoed there as one
    :data:`REQUEST_LINE` line; waits at most ``start_timeout`` seconds for its port file in
    ``$TMPDIR``; then execs the runtime's ``attest review agent --timeout TIMEOUT -- codex exec
    ... -- {prompt}`` (:func:`codex_argv`, the base URL that port). ``$1`` names the answer file
    of the image the fake serves (default ``answer.txt``: a plain name). The fake ends with the
    confinement (its PID namespace) once the adapter has printed the result.
    """
    words: list[str] = []
    for w in codex_argv(_CODEX_WORD, "{prompt}", port=0, base_url=f"http://{host}:{_PORT_WORD}/v1"):
        if w == _CODEX_WORD:
            words.append('"$R/bin/codex"')
        elif _PORT_WORD in w:
            words.append('"$provider"')
        else:
            words.append(shlex.quote(w))
    before, after = f"model_providers.fake={provider_config(f'http://{host}:{_PORT_WORD}/v1')}".split(_PORT_WORD)
    return f"""#!/bin/sh
# The deployment's reviewer (tests/support/agent_cli.review_script): the real codex CLI, answered by a
# fake model on the confinement's own loopback, through the runtime image's `attest review agent`.
set -eu
R="$ATTEST_IMAGE_REVIEWER"
answer="${{1:-answer.txt}}"
case "$answer" in ''|*/*|.*) echo "review: $answer is not a file name of the reviewer image" >&2; exit 2 ;; esac
port_file="$TMPDIR/fake-model.port"
"$ATTEST_IMAGE_RUNTIME/bin/python" -I -B "$R/fake_model.py" --host {shlex.quote(host)} --port 0 --port-file "$port_file" \\
    --answer-file "$R/$answer" --echo-requests </dev/null >&2 &
fake=$!
i=0
while [ ! -s "$port_file" ]; do
  kill -0 "$fake" 2>/dev/null || {{ echo "review: the fake model exited before it listened" >&2; exit 96; }}
  i=$((i + 1)); [ "$i" -le {start_timeout * 20} ] || {{ echo "review: no fake model after {start_timeout}s" >&2; exit 96; }}
  sleep 0.05
done
port="$(cat "$port_file")"
provider={shlex.quote(before)}"$port"{shlex.quote(after)}
exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review agent --timeout {int(timeout)} -- {" ".join(words)}
"""


def codex_command(binary: str, prompt: str, *, port: int, home: str, **kw: object) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` of :func:`codex_argv` for a fresh writable ``home`` (``CODEX_HOME`` is ``home/.codex``).

    Run it with ``stdin=subprocess.DEVNULL`` and a timeout. Under attest's ``run_from_images``
    the environment is attest's (``HOME`` is the run's scratch; codex then uses ``$HOME/.codex``,
    creating it), so only the argv is needed there.
    """
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "CODEX_HOME": os.path.join(home, ".codex"), "LC_ALL": "C.UTF-8",
           "TMPDIR": home, "NO_COLOR": "1"}
    os.makedirs(env["CODEX_HOME"], exist_ok=True)
    return codex_argv(binary, prompt, port=port, **kw), env  # type: ignore[arg-type]


# The wrapper a confined agent runs: wait (at most $3 seconds) until the port file exists and is not
# empty (the fake listens in this namespace), then exec the agent, under coreutils' timeout when $4
# is not 0 (codex retries an unreachable endpoint forever). $1 is the nonce NetnsFake looks for.
_WAIT = r'''N="$1"; F="$2"; T="$3"; R="$4"; shift 4
i=0
while [ ! -s "$F" ]; do
  i=$((i + 1)); [ "$i" -le $((T * 20)) ] || { echo "agent-wait $N: no fake model after ${T}s ($F)" >&2; exit 96; }
  sleep 0.05
done
[ "$R" = 0 ] || exec timeout -k 5 "$R" "$@"
exec "$@"'''


def wait_for_port_argv(argv: Sequence[str], *, nonce: str, port_file: str, timeout: int = 30,
                       run_timeout: int = 120) -> list[str]:
    """``argv`` wrapped so that it starts once ``port_file`` is written; the command line carries ``nonce``.

    ``port_file`` must be visible inside the confinement: in a directory passed read-only to it
    (a host directory bound read-only shows files the host writes later). The wrapper exits 96
    when no port file appears within ``timeout`` seconds; the agent is killed (exit 124, or 137)
    after ``run_timeout`` seconds (0: never).
    """
    return ["/bin/sh", "-c", _WAIT, "agent-wait", nonce, port_file, str(timeout), str(run_timeout), *argv]


class NetnsFake:
    """The fake model served inside a confined agent's own network namespace, from outside it.

    ``start()`` watches ``/proc`` for a process whose command line holds ``nonce`` and whose
    network namespace is not this process's (the confinement's pid 1 is the first), then runs
    ``fake_model.py --netns-of PID --lo-up --port PORT`` (joining the rootless confinement's user
    namespace first where there is one: its owner, the caller, has every capability there),
    which writes ``rendezvous/port`` once it listens; :func:`wait_for_port_argv` lets the agent
    start then. ``requests`` are the JSON lines it logged. Root, or the owner of the rootless
    confinement's user namespace, is needed (``ip link set lo up`` needs CAP_NET_ADMIN over it).

        rdv = tmp_path / "rdv"; rdv.mkdir(mode=0o755)
        with NetnsFake("<findings>[]</findings>", rendezvous=rdv) as fake:
            argv = wait_for_port_argv(codex_argv(codex, prompt, port=fake.port), nonce=fake.nonce,
                                      port_file=fake.port_file)
            run_review_step(..., argv, readonly=[codex_dir, str(rdv)])
        assert fake.requests[0]["path"] == "/v1/responses"
    """

    def __init__(self, answer: str, *, rendezvous: str | os.PathLike[str], port: int = CONFINED_PORT,
                 nonce: str | None = None, timeout: float = 60, python: str = sys.executable) -> None:
        self.rendezvous = Path(rendezvous)
        self.port, self.timeout, self.python = port, timeout, python
        self.nonce = nonce or f"attest-agent-{secrets.token_hex(8)}"
        self.port_file = str(self.rendezvous / "port")
        self.answer_file = self.rendezvous / "answer"
        self.requests_file = self.rendezvous / "requests.jsonl"
        self.answer_file.write_text(answer, encoding="utf-8")
        os.chmod(self.rendezvous, 0o755)
        self.pid: int | None = None  # the confined process whose namespace was joined
        self.error: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> NetnsFake:
        for p in (self.port_file, self.requests_file):
            Path(p).unlink(missing_ok=True)
        self._thread = threading.Thread(target=self._watch, name="netns-fake", daemon=True)
        self._thread.start()
        return self

    def __enter__(self) -> NetnsFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    @property
    def requests(self) -> list[dict[str, object]]:
        try:
            lines = self.requests_file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def _find(self) -> int | None:
        mine = os.readlink("/proc/self/ns/net")
        needle = self.nonce.encode()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if needle not in f.read():
                        continue
                if os.readlink(f"/proc/{name}/ns/net") != mine:
                    return int(name)
            except OSError:
                continue
        return None

    def _watch(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._stop.is_set() and time.monotonic() < deadline:
            pid = self._find()
            if pid is not None:
                self.pid = pid
                self._proc = subprocess.Popen(
                    [self.python, FAKE_MODEL_SCRIPT, "--netns-of", str(pid), "--lo-up", "--port", str(self.port),
                     "--port-file", self.port_file, "--answer-file", str(self.answer_file),
                     "--requests-file", str(self.requests_file)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                while not self._stop.is_set() and not os.path.exists(self.port_file):
                    if self._proc.poll() is not None:
                        assert self._proc.stderr is not None
                        self.error = f"the fake model exited {self._proc.returncode}: {self._proc.stderr.read().decode(errors='replace')}"
                        return
                    time.sleep(0.02)
                return
            time.sleep(0.02)
        if not self._stop.is_set():
            self.error = f"no confined process with {self.nonce} appeared in {self.timeout}s"
