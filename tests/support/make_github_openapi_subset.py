"""Regenerate tests/data/github-openapi/api.github.com.subset.json from the pinned ``@octokit/openapi`` tarball.

    python tests/support/make_github_openapi_subset.py            # fetch (npm pack, cached), verify, write
    python tests/support/make_github_openapi_subset.py --check    # compare only: exit 1 when the vendored file differs
    python tests/support/make_github_openapi_subset.py --tarball octokit-openapi-23.0.2.tgz

The tarball is used only when its SHA-512 is the pinned ``dist.integrity``
(:data:`support.github_openapi.INTEGRITY`); it is fetched with ``npm pack`` (or over HTTP from
``$ATTEST_TEST_NPM_REGISTRY``) into ``cache_root()/github-openapi/`` and kept there. The subset:
the operations of :data:`support.github_openapi.OPERATIONS`, each trimmed to ``operationId``,
``summary``, ``externalDocs``, ``parameters``, ``requestBody`` and ``responses`` (operation
descriptions, tags and ``x-*`` vendor extensions dropped), every component they reference,
transitively (except ``components/examples``), and no ``example``/``examples`` anywhere; written
as JSON with sorted keys, one-space indent, ASCII, and a final newline, so the same tarball always
gives the same bytes.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `support` importable as the suite does
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from support.agent_cli import CodexUnavailable, Pin, _integrity, cache_root, download_tarball
from support.github_openapi import (
    INTEGRITY,
    OPERATIONS,
    PACKAGE,
    SOURCE_MEMBER,
    SUBSET_FILE,
    VERSION,
    map_document_schemas,
    pointer_get,
    refs_in,
)

PIN = Pin(PACKAGE, VERSION, INTEGRITY, "package/generated", {"api.github.com.json": None}, "api.github.com.json")
_OPERATION_KEYS = ("operationId", "summary", "externalDocs", "parameters", "requestBody", "responses")
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class OpenAPIUnavailable(RuntimeError):
    """The pinned tarball is not cached and cannot be fetched (npm missing, the registry unreachable): a reason to skip."""


def fetch_tarball(cache_dir: str | Path | None = None, *, timeout: float = 300, registry: str | None = None) -> Path:
    """The pinned, verified tarball, fetched into ``cache_dir`` (default ``cache_root()/github-openapi``) the first time.

    Raises:
        OpenAPIUnavailable: it is not cached and npm (or the HTTP registry) cannot fetch it.
        RuntimeError: a tarball whose SHA-512 is not the pinned integrity (never skip that).
    """
    import os

    root = Path(cache_dir) if cache_dir is not None else cache_root() / "github-openapi"
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"octokit-openapi-{VERSION}.tgz"
    with open(root / f".octokit-openapi-{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            got = _integrity(target)
            if got == INTEGRITY:
                return target
            target.unlink()  # a partial or foreign file: fetch again, then verify
        work = Path(tempfile.mkdtemp(prefix=".octokit-openapi-", dir=root))
        try:
            registry = registry or os.environ.get("ATTEST_TEST_NPM_REGISTRY")
            try:
                tgz = download_tarball(PIN, work, registry=registry, timeout=timeout)
            except CodexUnavailable as e:  # agent_cli's "cannot fetch" (named for its first user)
                raise OpenAPIUnavailable(str(e)) from e
            got = _integrity(tgz)
            if got != INTEGRITY:
                raise RuntimeError(f"{PIN.spec}: the tarball's integrity is {got}, pinned {INTEGRITY}")
            os.replace(tgz, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def read_description(tarball: str | Path) -> dict[str, Any]:
    """``generated/api.github.com.json`` of a tarball whose integrity is the pinned one.

    Raises:
        RuntimeError: another tarball, or one without that member.
    """
    got = _integrity(Path(tarball))
    if got != INTEGRITY:
        raise RuntimeError(f"{tarball}: the integrity is {got}, pinned {INTEGRITY} ({PIN.spec})")
    with tarfile.open(tarball, "r|gz") as tar:  # a stream: stop at the member
        for member in tar:
            if member.name == SOURCE_MEMBER and member.isreg():
                f = tar.extractfile(member)
                assert f is not None
                doc: dict[str, Any] = json.loads(f.read())
                return doc
    raise RuntimeError(f"{tarball} has no {SOURCE_MEMBER}")


def _strip_examples(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k not in ("example", "examples")}


def _trim_media(content: Any) -> Any:
    if not isinstance(content, dict):
        return content
    return {mt: {k: v for k, v in body.items() if k not in ("example", "examples")} for mt, body in content.items()}


def _trim_response(response: Any) -> Any:
    if not isinstance(response, dict) or "$ref" in response:
        return response
    out = dict(response)
    if "content" in out:
        out["content"] = _trim_media(out["content"])
    if isinstance(out.get("headers"), dict):
        out["headers"] = {k: _trim_parameter(v) for k, v in out["headers"].items()}
    return out


def _trim_parameter(param: Any) -> Any:
    if not isinstance(param, dict) or "$ref" in param:
        return param
    return {k: v for k, v in param.items() if k not in ("example", "examples")}


def subset(full: Mapping[str, Any], operations: tuple[str, ...] = OPERATIONS) -> dict[str, Any]:
    """The trimmed description of ``operations`` (see the module docstring).

    Raises:
        KeyError: an operationId the description does not hold.
    """
    paths: dict[str, dict[str, Any]] = {}
    found: set[str] = set()
    for path, item in full["paths"].items():
        for method in _METHODS:
            op = item.get(method)
            if not isinstance(op, dict) or op.get("operationId") not in operations:
                continue
            found.add(op["operationId"])
            trimmed = {k: op[k] for k in _OPERATION_KEYS if k in op}
            if "parameters" in trimmed:
                trimmed["parameters"] = [_trim_parameter(p) for p in trimmed["parameters"]]
            if "requestBody" in trimmed:
                trimmed["requestBody"] = {**trimmed["requestBody"], "content": _trim_media(trimmed["requestBody"].get("content"))}
            trimmed["responses"] = {s: _trim_response(r) for s, r in trimmed.get("responses", {}).items()}
            paths.setdefault(path, {})[method] = trimmed
            if "parameters" in item:
                paths[path]["parameters"] = [_trim_parameter(p) for p in item["parameters"]]
    missing = sorted(set(operations) - found)
    if missing:
        raise KeyError(f"the description has no operation {', '.join(missing)}")
    # The transitive closure of the references, components/examples excluded (examples are dropped).
    components: dict[str, dict[str, Any]] = {}
    todo = sorted(refs_in(paths))
    seen: set[str] = set()
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        parts = ref.split("/")
        if len(parts) != 4 or parts[:2] != ["#", "components"]:
            raise ValueError(f"an unexpected reference {ref!r}")
        if parts[2] == "examples":
            continue
        value = pointer_get(full, ref)
        if parts[2] == "responses":
            value = _trim_response(value)
        elif parts[2] in ("parameters", "headers"):
            value = _trim_parameter(value)
        components.setdefault(parts[2], {})[parts[3]] = value
        todo.extend(sorted(refs_in(value) - seen))
    doc: dict[str, Any] = {
        "openapi": full["openapi"],
        "info": {
            "title": full["info"].get("title"),
            "version": full["info"].get("version"),
            "description": (f"A subset of {SOURCE_MEMBER.removeprefix('package/')} of {PIN.spec} ({INTEGRITY}): the operations "
                            "the tests' fake GitHub implements, their components, no examples. "
                            "Regenerate with tests/support/make_github_openapi_subset.py."),
            "license": full["info"].get("license"),
        },
        "paths": paths,
        "components": components,
    }
    # Drop the remaining examples inside schemas (a keyword, never a property named "example").
    doc = map_document_schemas(doc, _strip_examples)
    # Examples can reference other examples only; a reference to a dropped one must not remain.
    dangling = sorted(r for r in refs_in(doc) if r.startswith("#/components/examples/"))
    if dangling:
        raise ValueError(f"references to dropped examples remain: {dangling[:5]}")
    return doc


def render(doc: Mapping[str, Any]) -> bytes:
    """The stable bytes of the subset: sorted keys, one-space indent, ASCII, a final newline."""
    return (json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode("ascii")


def build(tarball: str | Path) -> bytes:
    """The subset's bytes, from the pinned tarball."""
    return render(subset(read_description(tarball)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tarball", help="a local octokit-openapi tarball (its integrity is checked) instead of fetching")
    parser.add_argument("--check", action="store_true", help="compare with the vendored subset instead of writing it")
    parser.add_argument("--out", default=str(SUBSET_FILE), help="where to write (default: the vendored file)")
    args = parser.parse_args(argv)
    tarball = Path(args.tarball) if args.tarball else fetch_tarball()
    data = build(tarball)
    out = Path(args.out)
    if args.check:
        same = out.is_file() and out.read_bytes() == data
        print(f"{out}: {'up to date' if same else 'DIFFERS from a fresh extraction'} ({PIN.spec})")
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print(f"wrote {out} ({len(data)} bytes) from {PIN.spec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
