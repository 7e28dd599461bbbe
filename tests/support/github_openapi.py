"""GitHub's published REST description (a vendored subset) as validators, and hand-written checks of two GraphQL answers.

**What is vendored.** ``tests/data/github-openapi/api.github.com.subset.json`` is the part of
``generated/api.github.com.json`` of the npm package ``@octokit/openapi`` (pinned below: version
and ``dist.integrity``) that :mod:`support.fake_github` implements: the operations of
:data:`OPERATIONS` (by ``operationId``) with every component they reference, transitively, and
nothing else; examples are dropped. ``tests/support/make_github_openapi_subset.py`` regenerates it
byte for byte from the verified tarball (see the README beside the subset).

**How it validates.** The description is OpenAPI 3.0.3, whose Schema Object is not JSON Schema;
:func:`to_json_schema` converts it to Draft 2020-12:

- ``nullable: true`` adds ``"null"`` to ``type`` (and ``null`` to an ``enum``: GitHub's description
  marks nullable enums such as a job's ``conclusion`` that way and means null is allowed); a
  nullable schema without ``type`` becomes ``anyOf: [schema, {type: null}]``;
- a ``$ref`` ignores its siblings (OpenAPI 3.0: "this object cannot be extended");
- boolean ``exclusiveMinimum``/``exclusiveMaximum`` (JSON Schema draft 4 style) become numbers;
- OpenAPI-only annotations (``discriminator``, ``xml``, ``externalDocs``, ``example``,
  ``readOnly``/``writeOnly``, ``deprecated``, ``x-*``) are dropped;
- ``format``: ``date-time`` (RFC 3339) and ``uri`` (absolute) are asserted; other formats
  (``int64``, ...) are annotations.

``strict`` (the default for what the fake sends) also sets ``unevaluatedProperties: false`` on
every object schema that lists ``properties`` and says nothing of other properties, so a field
the description does not name (a misspelling in the fake) is an error, not silently accepted.
A request body is checked twice: leniently (what GitHub itself refuses, answered 422) and strictly
(recorded only: GitHub ignores unknown request fields, but attest should not send any).

**Known gaps of the description**, patched at load time (:data:`PATCHES`), each one a documented
GitHub behaviour the description omits: a pull request's ``head.repo`` is ``null`` once the head
repository (a fork) is deleted.

**GraphQL** has no OpenAPI description: the two answers the fake gives (``nodes(ids:)`` of
pull-request reviews, and a pull request's ``reviewThreads``) are checked against JSON Schemas
written here by hand from GitHub's GraphQL reference (object types ``PullRequestReview``,
``PullRequestReviewThreadConnection``, ``PullRequestReviewThread``, ``PageInfo``; GraphQL's
non-null ``!`` is a required non-null property, anything else may be null).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import referencing
import referencing.jsonschema

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
#: The registry's ``dist.integrity`` of ``@octokit/openapi@23.0.2`` (sha512 of the tarball).
INTEGRITY = "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg=="
#: The tarball member the subset is cut from.
SOURCE_MEMBER = "package/generated/api.github.com.json"

SUBSET_DIR = Path(__file__).resolve().parent.parent / "data" / "github-openapi"
SUBSET_FILE = SUBSET_DIR / "api.github.com.subset.json"

#: The operations the fake implements, by operationId.
OPERATIONS = (
    "actions/list-jobs-for-workflow-run-attempt",
    "actions/list-workflow-runs",
    "git/get-commit",
    "git/get-ref",
    "issues/list-comments",
    "pulls/create-review",
    "pulls/get",
    "pulls/get-review",
    "pulls/list-reviews",
    "pulls/merge",
    "repos/create-commit-status",
    "repos/get",
    "repos/get-combined-status-for-ref",
    "repos/get-environment",
    "repos/list-commit-statuses-for-ref",
)

_BASE_URI = "urn:attest-tests:github-openapi"
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "unevaluatedProperties",
               "unevaluatedItems", "if", "then", "else")
_DROPPED = {"discriminator", "xml", "externalDocs", "example", "examples", "readOnly", "writeOnly", "deprecated", "nullable"}


# ----------------------------------------------------------------------------- walking OpenAPI documents

def map_schema(schema: Any, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """``schema`` rebuilt bottom-up: every (sub)schema object replaced by ``fn`` of it (children first).

    Only schema positions are walked (``properties`` values, ``items``, ``allOf`` members, ...), so a
    property *named* ``example`` or ``nullable`` is never mistaken for the keyword.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: map_schema(v, fn) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [map_schema(v, fn) for v in value]
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = map_schema(value, fn)
        else:
            out[key] = value
    return fn(out)


def map_document_schemas(doc: Mapping[str, Any], fn: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """A copy of an OpenAPI document with :func:`map_schema` applied to every schema in it.

    Schemas sit in ``components.schemas``, and under ``schema`` of parameters, headers and media
    types (of request bodies and responses, in operations and in components).
    """
    out = copy.deepcopy(dict(doc))

    def media(content: Any) -> None:
        for mt in (content or {}).values():
            if isinstance(mt, dict) and "schema" in mt:
                mt["schema"] = map_schema(mt["schema"], fn)

    def params(items: Iterable[Any]) -> None:
        for p in items:
            if isinstance(p, dict) and "schema" in p:
                p["schema"] = map_schema(p["schema"], fn)
            if isinstance(p, dict):
                media(p.get("content"))

    def response(r: Any) -> None:
        if isinstance(r, dict):
            media(r.get("content"))
            params((r.get("headers") or {}).values())

    comps = out.get("components", {})
    comps["schemas"] = {k: map_schema(v, fn) for k, v in comps.get("schemas", {}).items()}
    params(comps.get("parameters", {}).values())
    params(comps.get("headers", {}).values())
    for r in comps.get("responses", {}).values():
        response(r)
    for rb in comps.get("requestBodies", {}).values():
        if isinstance(rb, dict):
            media(rb.get("content"))
    for item in out.get("paths", {}).values():
        params(item.get("parameters", []))
        for op in item.values():
            if not isinstance(op, dict):
                continue
            params(op.get("parameters", []))
            if isinstance(op.get("requestBody"), dict):
                media(op["requestBody"].get("content"))
            for r in (op.get("responses") or {}).values():
                response(r)
    return out


def refs_in(value: Any) -> set[str]:
    """Every ``$ref`` string anywhere in ``value``."""
    found: set[str] = set()
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            ref = x.get("$ref")
            if isinstance(ref, str):
                found.add(ref)
            stack.extend(v for k, v in x.items() if k != "$ref" or not isinstance(v, str))
        elif isinstance(x, list):
            stack.extend(x)
    return found


def pointer_get(doc: Any, ref: str) -> Any:
    """The value a local ``#/a/b`` reference names (JSON pointer escapes ``~0``/``~1`` undone)."""
    if not ref.startswith("#/"):
        raise ValueError(f"not a local reference: {ref!r}")
    value = doc
    for part in ref[2:].split("/"):
        value = value[part.replace("~1", "/").replace("~0", "~")]
    return value


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


# ----------------------------------------------------------------------------- OpenAPI 3.0 -> JSON Schema 2020-12

def to_json_schema(node: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """One OpenAPI 3.0 Schema Object (its children already converted) as JSON Schema 2020-12 (see the module docstring)."""
    if "$ref" in node:
        return {"$ref": node["$ref"]}
    nullable = node.get("nullable") is True
    out = {k: v for k, v in node.items() if k not in _DROPPED and not k.startswith("x-")}
    for word, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(word), bool):
            if out.pop(word) and bound in out:
                out[word] = out.pop(bound)
    if strict and "properties" in out and "additionalProperties" not in out and out.get("type", "object") == "object":
        out["unevaluatedProperties"] = False
    if nullable:
        if "type" in out:
            t = out["type"]
            out["type"] = [*t, "null"] if isinstance(t, list) else [t, "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


#: Known gaps of GitHub's description: (JSON pointer of a schema, what to merge into it, why).
PATCHES: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("#/components/schemas/pull-request/properties/head/properties/repo",
     {"anyOf": [{"$ref": "#/components/schemas/repository"}, {"type": "null"}]},
     "head.repo is null once the head repository (a fork) is deleted"),
)

_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d)\Z")
FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time")
def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return True


@FORMATS.checks("uri")
def _uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and (bool(parts.netloc) or parts.scheme in ("urn", "mailto")) and " " not in value


def _describe(errors: Iterable[jsonschema.ValidationError], limit: int = 8) -> list[str]:
    out = []
    for top in sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), e.message))[:limit]:
        e = jsonschema.exceptions.best_match([top])  # into anyOf/oneOf: the branch that nearly matched
        assert e is not None
        message = e.message if len(e.message) <= 300 else e.message[:297] + "..."
        out.append(f"{e.json_path}: {message}")
    return out


class GitHubOpenAPI:
    """Validators of request and response bodies, per operationId, from a (subset of the) description.

    Raises:
        KeyError: from the ``check_*`` methods for an operationId the document does not hold.
    """

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        self.operations: dict[str, tuple[str, str, dict[str, Any]]] = {}
        for path, item in doc.get("paths", {}).items():
            for method, op in item.items():
                if isinstance(op, dict) and "operationId" in op:
                    self.operations[op["operationId"]] = (method.upper(), path, op)
        self._registries = {strict: self._registry(strict) for strict in (False, True)}
        self._validators: dict[tuple[str, bool], jsonschema.protocols.Validator] = {}
        self._seen: dict[tuple[str, int, bool, str], tuple[str, ...]] = {}

    @classmethod
    @functools.cache
    def vendored(cls) -> GitHubOpenAPI:
        """The vendored subset (loaded once per process)."""
        return cls(json.loads(SUBSET_FILE.read_bytes()))

    def _registry(self, strict: bool) -> referencing.Registry[Any]:
        converted = map_document_schemas(self.doc, lambda n: to_json_schema(n, strict=strict))
        for where, replacement, _why in PATCHES:
            parent, key = where.rsplit("/", 1)
            try:
                target = pointer_get(converted, parent)
            except (KeyError, TypeError):
                continue  # a subset without that schema
            target[key] = map_schema(replacement, lambda n: to_json_schema(n, strict=strict))
        resource = referencing.jsonschema.DRAFT202012.create_resource(converted)
        return referencing.Registry().with_resource(_BASE_URI, resource)

    def _validator(self, pointer: str, strict: bool) -> jsonschema.protocols.Validator:
        key = (pointer, strict)
        if key not in self._validators:
            schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": f"{_BASE_URI}{pointer}"}
            self._validators[key] = jsonschema.Draft202012Validator(schema, registry=self._registries[strict],
                                                                     format_checker=FORMATS)
        return self._validators[key]

    def _operation(self, op_id: str) -> tuple[str, dict[str, Any]]:
        method, path, op = self.operations[op_id]
        return f"#/paths/{_escape(path)}/{method.lower()}", op

    def documented_statuses(self, op_id: str) -> set[str]:
        return set(self._operation(op_id)[1].get("responses", {}))

    def response_pointer(self, op_id: str, status: int) -> str | None:
        """The JSON pointer of the ``application/json`` schema of ``status`` of ``op_id``, or None when none is described."""
        where, op = self._operation(op_id)
        responses = op.get("responses", {})
        key = str(status) if str(status) in responses else f"{str(status)[0]}XX" if f"{str(status)[0]}XX" in responses else None
        if key is None:
            return None
        pointer = f"{where}/responses/{key}"
        response = responses[key]
        while "$ref" in response:  # a component response
            pointer = response["$ref"]
            response = pointer_get(self.doc, pointer)
        if "schema" not in response.get("content", {}).get("application/json", {}):
            return None
        return f"{pointer}/content/application~1json/schema"

    def check_response(self, op_id: str, status: int, body: Any, *, strict: bool = True) -> list[str]:
        """What is wrong with ``body`` as the ``status`` answer of ``op_id``: [] when nothing.

        A 2xx status the description does not list is itself wrong; an error status without a
        described schema is not checked (GitHub answers 401, 5xx and others for any operation).
        """
        try:
            key = (op_id, status, strict, json.dumps(body, sort_keys=True))
        except (TypeError, ValueError):
            key = None
        if key is not None and key in self._seen:  # the same answer again (a pull request read twice): known
            return list(self._seen[key])
        problems = self._check_response(op_id, status, body, strict)
        if key is not None:
            self._seen[key] = tuple(problems)
        return problems

    def _check_response(self, op_id: str, status: int, body: Any, strict: bool) -> list[str]:
        pointer = self.response_pointer(op_id, status)
        if pointer is None:
            if 200 <= status < 300 and str(status) not in self.documented_statuses(op_id):
                return [f"status {status} is not a documented answer of {op_id} "
                        f"(documented: {', '.join(sorted(self.documented_statuses(op_id)))})"]
            return []
        return _describe(self._validator(pointer, strict).iter_errors(body))

    def request_pointer(self, op_id: str) -> str | None:
        where, op = self._operation(op_id)
        body = op.get("requestBody")
        if not isinstance(body, dict) or "schema" not in body.get("content", {}).get("application/json", {}):
            return None
        return f"{where}/requestBody/content/application~1json/schema"

    def check_request(self, op_id: str, body: Any, *, strict: bool = True) -> list[str]:
        """What is wrong with ``body`` as the JSON request body of ``op_id``: [] when nothing (or no body is described)."""
        pointer = self.request_pointer(op_id)
        if pointer is None:
            return []
        return _describe(self._validator(pointer, strict).iter_errors(body))


# ----------------------------------------------------------------------------- GraphQL, by hand

_NN_STR = {"type": "string"}
_OPT_STR = {"type": ["string", "null"]}
_ACTOR = {"type": ["object", "null"], "required": ["login"], "properties": {"login": _NN_STR}, "unevaluatedProperties": False}
_ERRORS = {"type": "array", "minItems": 1, "items": {
    "type": "object", "required": ["message"],
    "properties": {"message": _NN_STR, "type": _NN_STR, "path": {"type": "array", "items": {"type": ["string", "integer"]}},
                   "locations": {"type": "array", "items": {"type": "object", "required": ["line", "column"],
                                                            "properties": {"line": {"type": "integer"}, "column": {"type": "integer"}}}},
                   "extensions": {"type": "object"}},
    "unevaluatedProperties": False}}

#: ``query($ids: [ID!]!) { nodes(ids: $ids) { __typename id ... on PullRequestReview { fullDatabaseId lastEditedAt editor { login } includesCreatedEdit } } }``
GRAPHQL_NODES_ANSWER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "data": {"type": ["object", "null"], "required": ["nodes"], "unevaluatedProperties": False, "properties": {
            "nodes": {"type": "array", "items": {"anyOf": [
                {"type": "null"},
                {"type": "object", "required": ["__typename", "id", "fullDatabaseId", "lastEditedAt", "editor", "includesCreatedEdit"],
                 "unevaluatedProperties": False,
                 "properties": {"__typename": {"const": "PullRequestReview"}, "id": _NN_STR,
                                "fullDatabaseId": {"type": ["string", "null"], "pattern": "^(0|[1-9][0-9]*)$"},  # BigInt
                                "lastEditedAt": {"type": ["string", "null"], "format": "date-time"}, "editor": _ACTOR,
                                "includesCreatedEdit": {"type": "boolean"}}},
                {"type": "object", "required": ["__typename", "id"], "unevaluatedProperties": False,  # another node type
                 "properties": {"__typename": {"type": "string", "not": {"const": "PullRequestReview"}}, "id": _NN_STR}},
            ]}}}},
        "errors": _ERRORS,
    },
    "anyOf": [{"required": ["data"]}, {"required": ["errors"]}],
    "unevaluatedProperties": False,
}

_THREAD = {
    "type": "object", "unevaluatedProperties": False,
    "required": ["id", "isResolved", "isOutdated", "path", "line", "comments"],
    "properties": {
        "id": _NN_STR, "isResolved": {"type": "boolean"}, "isOutdated": {"type": "boolean"}, "path": _NN_STR,
        "line": {"type": ["integer", "null"], "minimum": 1},
        "comments": {"type": "object", "required": ["nodes"], "unevaluatedProperties": False, "properties": {
            "nodes": {"type": ["array", "null"], "maxItems": 1, "items": {
                "type": ["object", "null"], "required": ["author", "url"], "unevaluatedProperties": False,
                "properties": {"author": _ACTOR, "url": {"type": "string", "format": "uri"}}}}}},
    },
}

#: The answer to :data:`support.fake_github.THREADS_QUERY` (a pull request's review threads, one page).
GRAPHQL_THREADS_ANSWER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "data": {"type": ["object", "null"], "required": ["repository"], "unevaluatedProperties": False, "properties": {
            "repository": {"type": ["object", "null"], "required": ["pullRequest"], "unevaluatedProperties": False, "properties": {
                "pullRequest": {"type": ["object", "null"], "required": ["reviewThreads"], "unevaluatedProperties": False,
                                "properties": {"reviewThreads": {
                                    "type": "object", "required": ["pageInfo", "nodes"], "unevaluatedProperties": False,
                                    "properties": {
                                        "pageInfo": {"type": "object", "required": ["hasNextPage", "endCursor"],
                                                     "unevaluatedProperties": False,
                                                     "properties": {"hasNextPage": {"type": "boolean"}, "endCursor": _OPT_STR}},
                                        "nodes": {"type": ["array", "null"], "maxItems": 100,
                                                  "items": {"anyOf": [{"type": "null"}, _THREAD]}}}}}}}}}},
        "errors": _ERRORS,
    },
    "anyOf": [{"required": ["data"]}, {"required": ["errors"]}],
    "unevaluatedProperties": False,
}

#: Any other GraphQL answer: errors only (GitHub answers a query it cannot run with HTTP 200 and ``errors``).
GRAPHQL_ERRORS_ANSWER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "required": ["errors"], "properties": {"errors": _ERRORS, "data": {"type": "null"}},
    "unevaluatedProperties": False,
}


@functools.cache
def _graphql_validator(name: str) -> jsonschema.protocols.Validator:
    schema = {"nodes": GRAPHQL_NODES_ANSWER, "threads": GRAPHQL_THREADS_ANSWER, "errors": GRAPHQL_ERRORS_ANSWER}[name]
    return jsonschema.Draft202012Validator(schema, format_checker=FORMATS)


def check_graphql(kind: str, answer: Any, *, ids: list[str] | None = None) -> list[str]:
    """What is wrong with a GraphQL ``answer`` of ``kind`` (``nodes``, ``threads``, ``errors``): [] when nothing.

    For ``nodes``, ``ids`` are the ids asked for: ``data.nodes`` must answer each, in order
    (a node, or null with a ``NOT_FOUND`` error naming its index).
    """
    problems = _describe(_graphql_validator(kind).iter_errors(answer))
    if kind == "nodes" and not problems and ids is not None and isinstance(answer.get("data"), dict):
        nodes = answer["data"]["nodes"]
        if len(nodes) != len(ids):
            problems.append(f"$.data.nodes: {len(nodes)} nodes for {len(ids)} ids")
        missing = {e["path"][1] for e in answer.get("errors", []) if e.get("type") == "NOT_FOUND" and len(e.get("path", [])) == 2}
        for i, (want, node) in enumerate(zip(ids, nodes, strict=False)):
            if node is None and i not in missing:
                problems.append(f"$.data.nodes[{i}]: null without a NOT_FOUND error")
            if node is not None and node["id"] != want:
                problems.append(f"$.data.nodes[{i}]: the node of {node['id']!r}, asked {want!r}")
    return problems


__all__ = ["FORMATS", "GRAPHQL_ERRORS_ANSWER", "GRAPHQL_NODES_ANSWER", "GRAPHQL_THREADS_ANSWER", "INTEGRITY", "OPERATIONS",
           "PACKAGE", "PATCHES", "SOURCE_MEMBER", "SUBSET_DIR", "SUBSET_FILE", "VERSION", "GitHubOpenAPI", "check_graphql",
           "map_document_schemas", "map_schema", "pointer_get", "refs_in", "to_json_schema"]
