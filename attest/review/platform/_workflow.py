"""The trusted review workflow of a consumer repository, ``.github/workflows/attest-review.yml`` (docs/github.md).

``attest init github`` writes it. :func:`render_workflow` is a pure function of a
:class:`WorkflowOptions` (every value checked when the options are built: a constructed options
object is always valid) and :func:`write_workflow` puts the text in place, through descriptors,
never through a link, refusing to replace another file without ``force``.

What the workflow is (each point is a test in tests/review/test_github_workflow.py):

1. ``pull_request_target`` only, so the workflow and everything it runs are the **base** branch's;
   the base is checked out by full SHA, the head is fetched as git objects only and asserted to be
   the event's head, and nothing of it is ever checked out or run;
2. ``permissions: {}`` at the top, the least per job; no repository or organization secret at all:
   the App's private key is the one secret, in the protected environment only, and only the
   same-repository ``publish`` job attaches that environment;
3. the attest steps run on the deployment's self-hosted runner: attest itself, the state
   directory, PINS, TRUST, the installed Skill, its installation attestation and the signing key
   are absolute paths there, never repository secrets or files of the repository;
4. ``review`` (every pull request, no secret): bootstrap, review start, review exec, review
   serialize; its payload and record stay in the deployment's state directory, keyed by run id and
   attempt, for ``publish`` (same repository: the App's token posts the review and the gate's
   ``attest/merge-gate`` status) or ``advisory`` (a fork: the review posted with the workflow's
   own token, which never qualifies and never runs the gate).

    >>> options = WorkflowOptions(state_dir="/var/lib/attest", pins="/etc/attest/pins.toml",
    ...     policy="/etc/attest/trust.toml", skill="/home/ci/.agents/skills/agent-policy",
    ...     installation="/var/lib/attest/installations/agent-policy.json", key="/etc/attest/deploy.pem",
    ...     required_checks=("test",))
    >>> text = render_workflow(options)
    >>> written = write_workflow("/src/widgets", options)  # doctest: +SKIP
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..._digest import sha256_of
from ..._safefs import AT_FDCWD, UnsafeEntry, create_at, open_dir_at, open_regular_at, replace_at
from ...errors import CommonCode, Finding, InputError, ReasonCode


class WorkflowCode(ReasonCode):
    WORKFLOW_BAD_OPTION = "WORKFLOW_BAD_OPTION"  # a value that would be written into the workflow is refused (not absolute, a newline, `${{`, ...)
    WORKFLOW_EXISTS = "WORKFLOW_EXISTS"          # another file is at .github/workflows/attest-review.yml: --force replaces it
    WORKFLOW_PATH_UNSAFE = "WORKFLOW_PATH_UNSAFE"  # .github, .github/workflows or the file is a symbolic link or not a directory / regular file


#: Where the workflow lives in the consumer repository.
WORKFLOW_PATH = ".github/workflows/attest-review.yml"
DEFAULT_ATTEST = "/opt/attest/bin/attest"
DEFAULT_RUNNER_LABELS = ("self-hosted", "attest")
DEFAULT_ENVIRONMENT = "attest-review-trusted"
DEFAULT_SEMANTIC = "docs/review/policy-context.md"
DEFAULT_ADAPTER = "docs/review/github-review.json"
BACKENDS = ("immutable", "readonly", "ro-bind")
#: The environment's one secret and its two variables (docs/github.md "The protected environment").
APP_KEY_SECRET = "ATTEST_REVIEW_ENV_APP_PRIVATE_KEY"
APP_CLIENT_ID_VAR = "ATTEST_REVIEW_APP_CLIENT_ID"
APP_SLUG_VAR = "ATTEST_REVIEW_APP_SLUG"
#: Below the state directory: one directory per run attempt, the review job's files for the later jobs.
RUNS_DIR = "workflow-runs"

# Actions, pinned by the full commit id of a release tag (a tag can be moved; a commit cannot).
CHECKOUT = ("actions/checkout", "3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1")
APP_TOKEN = ("actions/create-github-app-token", "1b10c78c7865c340bc4f6099eb2f838309f1e8c3", "v3.1.1")

_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
_ENVIRONMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}\Z")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_REPO_PATH = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*\Z")
MAX_PATH = 1024
MAX_CHECK = 200
MAX_CHECKS = 50


def _text_problem(value: str) -> str | None:
    """Why ``value`` cannot be written into the workflow as a literal, or None.

    A control character would end a YAML scalar or a shell word; ``${{`` starts an expression
    that GitHub evaluates wherever it appears, ``env:`` values included (template injection).
    """
    if not value:
        return "it is empty"
    if any(ord(c) < 0x20 or ord(c) == 0x7F or 0x80 <= ord(c) < 0xA0 for c in value):
        return "it contains a control character (a newline?)"
    if "${{" in value:
        return "it contains `${{`, which GitHub would evaluate as an expression"
    if value != value.strip():
        return "it starts or ends with white space"
    return None


def _path_problem(value: str) -> str | None:
    """Why ``value`` is not an absolute, normalized path on the runner, or None."""
    problem = _text_problem(value)
    if problem is not None:
        return problem
    if len(value) > MAX_PATH:
        return f"it is longer than {MAX_PATH} characters"
    if not value.startswith("/"):
        return "it is not an absolute path (the runner's working directory is the checkout of the base)"
    if value.startswith("//") or posixpath.normpath(value) != value:
        return "it is not a normalized path (`..`, `.`, `//` or a trailing `/`)"
    return None


@dataclass(frozen=True, slots=True)
class WorkflowOptions:
    """Everything :func:`render_workflow` writes into the workflow, checked when built.

    Paths are the deployment's, absolute on the self-hosted runner. ``required_checks`` are the
    CI checks the merge gate requires (at least one). ``ci_dir``: where the deployment's CI jobs
    keep their signed results, ``CI_DIR/<head>/*.json`` (``attest merge-gate ci-result -o``);
    without it the gate has no CI result and stays pending. ``reviewer_image`` and
    ``reviewer_attestation`` come together or not at all (without them the stand-in reviewer
    runs, which says it analysed nothing).

    Raises:
        InputError: ``WORKFLOW_BAD_OPTION``, one finding per refused value.
    """

    state_dir: str
    pins: str
    policy: str
    skill: str
    installation: str
    key: str
    required_checks: tuple[str, ...]
    attest: str = DEFAULT_ATTEST
    runner_labels: tuple[str, ...] = DEFAULT_RUNNER_LABELS
    environment: str = DEFAULT_ENVIRONMENT
    reviewer_image: str | None = None
    reviewer_attestation: str | None = None
    semantic: str = DEFAULT_SEMANTIC
    adapter: str = DEFAULT_ADAPTER
    ci_dir: str | None = None
    backend: str | None = None

    def __post_init__(self) -> None:
        found = self.problems()
        if found:
            raise InputError(findings=found)

    def problems(self) -> list[Finding]:
        """Every refused value, each its own finding (pure)."""
        found: list[Finding] = []

        def bad(option: str, value: object, why: str) -> None:
            shown = "" if value is None else f" {value!r}"
            found.append(Finding(WorkflowCode.WORKFLOW_BAD_OPTION, None, f"{option}{shown}: {why}"))

        paths = [("--attest", self.attest), ("--state-dir", self.state_dir), ("--pins", self.pins), ("--policy", self.policy),
                 ("--skill", self.skill), ("--installation", self.installation), ("--key", self.key)]
        if self.reviewer_attestation is not None:
            paths.append(("--reviewer-attestation", self.reviewer_attestation))
        if self.ci_dir is not None:
            paths.append(("--ci-dir", self.ci_dir))
        for option, value in paths:
            why = _path_problem(value) if isinstance(value, str) else "it is not a string"
            if why is not None:
                bad(option, value, why)
        if (self.reviewer_image is None) != (self.reviewer_attestation is None):
            bad("--reviewer-image" if self.reviewer_image is None else "--reviewer-attestation", None,
                "--reviewer-image and --reviewer-attestation come together")
        if self.reviewer_image is not None and not (isinstance(self.reviewer_image, str) and _DIGEST.match(self.reviewer_image)):
            bad("--reviewer-image", self.reviewer_image, "it is not sha256:<64 lowercase hex> (the frozen image's identity)")
        if not isinstance(self.runner_labels, tuple) or not self.runner_labels:
            bad("--runner-label", None, "at least one runner label is needed (the deployment's runner)")
        else:
            for label in self.runner_labels:
                if not (isinstance(label, str) and _LABEL.match(label)):
                    bad("--runner-label", label, "a label is 1-100 letters, digits, `.`, `_` or `-`, starting with a letter or digit")
            if len(set(self.runner_labels)) != len(self.runner_labels):
                bad("--runner-label", self.runner_labels, "a label is named twice")
        if not isinstance(self.required_checks, tuple) or not self.required_checks:
            bad("--require-check", None, "at least one required CI check: a gate without one authorizes nothing")
        else:
            if len(self.required_checks) > MAX_CHECKS:
                bad("--require-check", len(self.required_checks), f"at most {MAX_CHECKS} checks")
            for check in self.required_checks:
                why = _text_problem(check) if isinstance(check, str) else "it is not a string"
                if why is None and len(check) > MAX_CHECK:
                    why = f"it is longer than {MAX_CHECK} characters"
                if why is not None:
                    bad("--require-check", check, why)
            if len(set(self.required_checks)) != len(self.required_checks):
                bad("--require-check", self.required_checks, "a check is named twice")
        if not (isinstance(self.environment, str) and _ENVIRONMENT.match(self.environment)):
            bad("--environment", self.environment, "an environment name is letters, digits, `.`, `_` or `-`")
        for option, value in (("--semantic", self.semantic), ("--adapter", self.adapter)):
            if not (isinstance(value, str) and _REPO_PATH.match(value)) or any(p in (".", "..") for p in value.split("/")):
                bad(option, value, "a repository-relative path of the base (letters, digits, `.`, `_`, `-` and `/`; no `.` or `..`)")
        if self.backend is not None and self.backend not in BACKENDS:
            bad("--backend", self.backend, f"one of {', '.join(BACKENDS)}")
        return found


# -- rendering (pure) --------------------------------------------------------------------------------------------------


def _q(value: str) -> str:
    """A YAML double-quoted scalar of a checked value (JSON's escapes are YAML's)."""
    return json.dumps(value)


def _uses(action: tuple[str, str, str]) -> str:
    name, sha, version = action
    return f"{name}@{sha} # {version}"


def _runs_on(options: WorkflowOptions) -> str:
    return "[" + ", ".join(_q(label) for label in options.runner_labels) + "]"


def _block(script: str, indent: int) -> str:
    pad = " " * indent
    return "\n".join((pad + line) if line else "" for line in script.strip("\n").split("\n"))


# The work directory of this run attempt's review: a new directory in the deployment's state
# directory, never a place a pull request or another repository can write.
_WORK = 'work="$ATTEST_STATE_DIR/workflow-runs/$HANDOFF"'

_FETCH = r'''
# The head's objects only, by the event's exact commit id: never checked out, never run.
# The token reaches git through its environment (never a command line, never .git/config).
auth="$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 -w0)"
echo "::add-mask::$auth"
GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="http.$GITHUB_SERVER_URL/.extraheader" GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $auth" \
  git fetch --no-tags --no-recurse-submodules origin "$HEAD_SHA"
test "$(git rev-parse FETCH_HEAD)" = "$HEAD_SHA"
git cat-file -e "$HEAD_SHA^{commit}"
'''

_BOOTSTRAP = r'''
HANDOFF="$GITHUB_RUN_ID.$GITHUB_RUN_ATTEMPT"
@WORK@
umask 077
mkdir -p -- "$ATTEST_STATE_DIR/workflow-runs"
mkdir -- "$work"
"$ATTEST" bootstrap --pins "$ATTEST_PINS" --policy "$ATTEST_TRUST" --state-dir "$ATTEST_STATE_DIR" \
  --skill "$ATTEST_SKILL" --installation "$ATTEST_INSTALLATION" --repo "$GITHUB_WORKSPACE/.git" \
  --github "$GITHUB_REPOSITORY" --pr "$PR" --token-env GITHUB_TOKEN --key "$ATTEST_KEY" -o "$work/handoff.json"
'''

_START = r'''
HANDOFF="$GITHUB_RUN_ID.$GITHUB_RUN_ATTEMPT"
@WORK@
"$ATTEST" review start --handoff "$work/handoff.json" --policy "$ATTEST_TRUST" --state-dir "$ATTEST_STATE_DIR" \
  --repo "$GITHUB_WORKSPACE/.git" --github "$GITHUB_REPOSITORY" --pr "$PR" --token-env GITHUB_TOKEN \
  --semantic "$ATTEST_SEMANTIC" --adapter "$ATTEST_ADAPTER" | tee "$work/start.txt"
# Its first line: "STARTED review <32 hex> of ...".
read -r verdict noun review _ < "$work/start.txt"
test "$verdict $noun" = "STARTED review"
[[ "$review" =~ ^[0-9a-f]{32}$ ]]
printf '%s\n' "$review" > "$work/review-id"
'''

_EXEC = r'''
HANDOFF="$GITHUB_RUN_ID.$GITHUB_RUN_ATTEMPT"
@WORK@
review="$(cat "$work/review-id")"
"$ATTEST" review exec --handoff "$work/handoff.json" --policy "$ATTEST_TRUST" --state-dir "$ATTEST_STATE_DIR" \
  --review "$review" -o "$work/result.json"@REVIEWER@ -- /bin/sh -c "$ATTEST_REVIEWER"
'''

_REVIEWER = ' \\\n  --reviewer "$ATTEST_REVIEWER_IMAGE" --reviewer-attestation "$ATTEST_REVIEWER_ATTESTATION"'

_SERIALIZE = r'''
HANDOFF="$GITHUB_RUN_ID.$GITHUB_RUN_ATTEMPT"
@WORK@
review="$(cat "$work/review-id")"
status=0
"$ATTEST" review serialize --state-dir "$ATTEST_STATE_DIR" --review "$review" --result "$work/result.json" \
  --key "$ATTEST_KEY" -o "$work/payload.json" --record "$work/record.json" --token-env GITHUB_TOKEN || status=$?
# A failed analysis is serialized too (exit 1): its record is published, then the job fails.
if [ -s "$work/record.json" ] && [ -s "$work/payload.json" ]; then
  printf 'record=written\nhandoff=%s\n' "$HANDOFF" >> "$GITHUB_OUTPUT"
fi
exit "$status"
'''

_HANDOFF_CHECK = r'''
[[ "$HANDOFF" =~ ^[0-9]+\.[0-9]+$ ]]
@WORK@'''

_PUBLISH = _HANDOFF_CHECK + r'''
[[ "$APP_SLUG" =~ ^[a-z0-9][a-z0-9-]*$ ]] || { echo "the variable @APP_SLUG_VAR@ is not an App slug" >&2; exit 1; }
"$ATTEST" review publish --github "$GITHUB_REPOSITORY" --pr "$PR" --payload "$work/payload.json" --record "$work/record.json" \
  --policy "$ATTEST_TRUST" --token-env ATTEST_APP_TOKEN --app-login "${APP_SLUG}[bot]"
'''

_GATE = _HANDOFF_CHECK + r'''
[[ "$HEAD_SHA" =~ ^([0-9a-f]{40}|[0-9a-f]{64})$ ]]
args=()
while IFS= read -r check; do
  args+=(--require-check "$check")
done <<< "$ATTEST_REQUIRED_CHECKS"
@CI@
"$ATTEST" merge-gate check --github "$GITHUB_REPOSITORY" --pr "$PR" --record "$work/record.json" --policy "$ATTEST_TRUST" \
  --state-dir "$ATTEST_STATE_DIR" "${args[@]}" --publish-status --token-env ATTEST_APP_TOKEN
'''

_CI = r'''# The deployment's CI jobs sign each check's result for this head into $ATTEST_CI_DIR/<head>/.
if [ -d "$ATTEST_CI_DIR/$HEAD_SHA" ]; then
  for result in "$ATTEST_CI_DIR/$HEAD_SHA"/*.json; do
    if [ -f "$result" ]; then args+=(--ci "$result"); fi
  done
fi'''

_ADVISORY = _HANDOFF_CHECK + r'''
"$ATTEST" review publish --github "$GITHUB_REPOSITORY" --pr "$PR" --payload "$work/payload.json" --record "$work/record.json" \
  --policy "$ATTEST_TRUST" --token-env GITHUB_TOKEN --app-login "github-actions[bot]"
'''


def _script(template: str, indent: int, **parts: str) -> str:
    text = template.replace("@WORK@", _WORK)
    for name, value in parts.items():
        text = text.replace(f"@{name}@", value)
    return _block(text, indent)


def render_workflow(options: WorkflowOptions) -> str:
    """The text of ``.github/workflows/attest-review.yml`` for ``options`` (pure; the same options, the same bytes).

    Raises:
        Nothing: ``options`` were checked when built.
    """
    o = options
    runs_on = _runs_on(o)
    reviewer = ('exec "$ATTEST_IMAGE_REVIEWER/bin/review"' if o.reviewer_image is not None
                else 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in')
    review_env = [f"ATTEST_PINS: {_q(o.pins)}", f"ATTEST_SKILL: {_q(o.skill)}", f"ATTEST_INSTALLATION: {_q(o.installation)}",
                  f"ATTEST_KEY: {_q(o.key)}", f"ATTEST_SEMANTIC: {_q(o.semantic)}", f"ATTEST_ADAPTER: {_q(o.adapter)}"]
    if o.backend is not None:
        review_env.append(f"ATTEST_BACKEND: {_q(o.backend)}")
    if o.reviewer_image is not None and o.reviewer_attestation is not None:
        review_env += [f"ATTEST_REVIEWER_IMAGE: {_q(o.reviewer_image)}",
                       f"ATTEST_REVIEWER_ATTESTATION: {_q(o.reviewer_attestation)}"]
    # The reviewer's command line, run by `review exec` inside its confinement (a literal: the
    # $ATTEST_IMAGE_* names are the confinement's, expanded there by /bin/sh).
    review_env.append(f"ATTEST_REVIEWER: {_q(reviewer)}")
    gate_env = [f"ATTEST_REQUIRED_CHECKS: {_q(chr(10).join(o.required_checks))}"]
    if o.ci_dir is not None:
        gate_env.append(f"ATTEST_CI_DIR: {_q(o.ci_dir)}")
    env8 = "\n".join("      " + line for line in review_env)
    gate8 = "\n".join("          " + line for line in gate_env)
    same_repo = "github.event.pull_request.head.repo.full_name == github.repository"
    fork = "github.event.pull_request.head.repo.full_name != github.repository"
    handed = "!cancelled() && needs.review.outputs.record == 'written'"
    return f"""\
# Generated by `attest init github` (docs/github.md "The generated workflow"). Change the options
# and run it again rather than editing this file: every value in it was checked when it was written.
#
# The trusted review of every pull request into this repository, run from the BASE commit's copy of
# this file only. The pull request's head is fetched as git objects and never checked out, built or
# run; attest and every deployment file (its state, PINS, TRUST, the installed Skill, the signing
# key) are the self-hosted runner's, never this repository's and never a secret of it. The only
# secret is the review App's private key, in the protected environment {o.environment} alone.
name: attest review

on:
  # pull_request_target on purpose: this file and every step it runs are the base's, and the head is
  # only fetched as git objects for attest to read; it is never checked out, built or executed.
  pull_request_target:  # zizmor: ignore[dangerous-triggers] the head is never checked out or run (above)
    types: [opened, synchronize, reopened, ready_for_review]

# Nothing by default: each job grants its GITHUB_TOKEN the least it needs.
permissions: {{}}

# One run per pull request at a time, and a started one is never cancelled: a cancelled publish
# could leave a review posted without the gate's status, a cancelled review a run claimed but
# never finished (which keeps its head blocked).
concurrency:
  group: attest-review-${{{{ github.event.pull_request.number }}}}
  cancel-in-progress: false

defaults:
  run:
    shell: bash

env:
  # The deployment, on the self-hosted runner: absolute paths there, outside every repository.
  ATTEST: {_q(o.attest)}
  ATTEST_STATE_DIR: {_q(o.state_dir)}
  ATTEST_TRUST: {_q(o.policy)}

jobs:
  review:
    name: attest review
    # A draft waits for ready_for_review: an analysis of a head that fails keeps that head blocked.
    if: github.event.pull_request.draft == false
    # The deployment (its store, keys and trust policy) lives on this self-hosted runner; the job runs
    # nothing of the pull request, and attest confines the reviewer in namespaces of its own.
    runs-on: {runs_on}  # zizmor: ignore[self-hosted-runner] the deployment's runner (above)
    timeout-minutes: 60
    permissions:
      contents: read  # the base checkout, the head's objects, the base commit through the API
      pull-requests: read  # the pull request's identities, which bootstrap, start and serialize compare
    outputs:
      # The review's payload and record stay on the runner, in a new directory of the deployment's
      # state directory named by this run's id and attempt (never an artifact: nothing a pull request
      # or another workflow can upload or replace); the later jobs run there too and read them.
      record: ${{{{ steps.serialize.outputs.record }}}}
      handoff: ${{{{ steps.serialize.outputs.handoff }}}}
    env:
{env8}
    steps:
      - name: Check out the base commit (full SHA; no credentials kept)
        uses: {_uses(CHECKOUT)}
        with:
          ref: ${{{{ github.event.pull_request.base.sha }}}}
          persist-credentials: false
          fetch-depth: 0  # the merge base is computed from the history of base and head

      - name: Fetch the head as git objects (never checked out or run)
        env:
          HEAD_SHA: ${{{{ github.event.pull_request.head.sha }}}}
          GITHUB_TOKEN: ${{{{ github.token }}}}
        run: |
{_script(_FETCH, 10)}

      - name: attest bootstrap
        env:
          PR: ${{{{ github.event.pull_request.number }}}}
          GITHUB_TOKEN: ${{{{ github.token }}}}
        run: |
{_script(_BOOTSTRAP, 10)}

      - name: attest review start
        id: start
        env:
          PR: ${{{{ github.event.pull_request.number }}}}
          GITHUB_TOKEN: ${{{{ github.token }}}}
        run: |
{_script(_START, 10)}

      # No token in this step: the reviewer gets nothing of the runner but the frozen images.
      - name: attest review exec
        run: |
{_script(_EXEC, 10, REVIEWER=_REVIEWER if o.reviewer_image is not None else "")}

      # Also after a failed analysis: its record says so, and is published like any other.
      - name: attest review serialize
        id: serialize
        if: ${{{{ !cancelled() && steps.start.outcome == 'success' }}}}
        env:
          GITHUB_TOKEN: ${{{{ github.token }}}}
        run: |
{_script(_SERIALIZE, 10)}

  publish:
    name: attest publish
    needs: review
    # Same-repository pull requests only: a fork's review never attaches the environment.
    if: ${{{{ {handed} && {same_repo} }}}}
    # The review's files and the deployment's state are on the deployment's runner; nothing of the
    # pull request runs here.
    runs-on: {runs_on}  # zizmor: ignore[self-hosted-runner] the deployment's runner (above)
    timeout-minutes: 15
    # The protected environment holds the App's private key; its deployment branches are the
    # protected default branch only (docs/github.md "The protected environment").
    environment: {_q(o.environment)}
    # The App's token reads and writes; this job's GITHUB_TOKEN needs nothing at all. A commit
    # status posted with GITHUB_TOKEN would be github-actions', which any workflow can forge.
    permissions: {{}}
    steps:
      - name: Mint the App's token (this repository only)
        id: app-token
        uses: {_uses(APP_TOKEN)}
        with:
          client-id: ${{{{ vars.{APP_CLIENT_ID_VAR} }}}}
          private-key: ${{{{ secrets.{APP_KEY_SECRET} }}}}
          owner: ${{{{ github.repository_owner }}}}
          repositories: ${{{{ github.event.repository.name }}}}
          permission-contents: read  # the base commit and the pull request's files, as the gate reads them
          permission-pull-requests: write  # the review, and the gate's reads of the pull request and its threads
          permission-statuses: write  # the attest/merge-gate commit status

      - name: attest review publish
        env:
          ATTEST_APP_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          APP_SLUG: ${{{{ vars.{APP_SLUG_VAR} }}}}
          PR: ${{{{ github.event.pull_request.number }}}}
          HANDOFF: ${{{{ needs.review.outputs.handoff }}}}
        run: |
{_script(_PUBLISH, 10, APP_SLUG_VAR=APP_SLUG_VAR)}

      - name: attest merge-gate check
        env:
          ATTEST_APP_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          PR: ${{{{ github.event.pull_request.number }}}}
          HEAD_SHA: ${{{{ github.event.pull_request.head.sha }}}}
          HANDOFF: ${{{{ needs.review.outputs.handoff }}}}
{gate8}
        run: |
{_script(_GATE, 10, CI=_CI if o.ci_dir is not None else "")}

  advisory:
    name: attest advisory review
    needs: review
    # A fork's pull request: its review is posted with this workflow's own token, as
    # github-actions[bot], whom neither the merge gate nor the trusted-producer evidence accepts.
    if: ${{{{ {handed} && {fork} }}}}
    # The review's files and the deployment's state are on the deployment's runner; nothing of the
    # pull request runs here.
    runs-on: {runs_on}  # zizmor: ignore[self-hosted-runner] the deployment's runner (above)
    timeout-minutes: 15
    permissions:
      contents: read  # the base commit, as publish reads it
      pull-requests: write  # the advisory review, and nothing else
    steps:
      - name: attest review publish (advisory)
        env:
          GITHUB_TOKEN: ${{{{ github.token }}}}
          PR: ${{{{ github.event.pull_request.number }}}}
          HANDOFF: ${{{{ needs.review.outputs.handoff }}}}
        run: |
{_script(_ADVISORY, 10)}
"""


# -- writing -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WrittenWorkflow:
    """The workflow file as it now is: where, its SHA-256, and whether this call changed it."""

    path: str
    sha256: str
    changed: bool

    def to_json(self) -> dict[str, object]:
        return {"ok": True, "workflow": self.path, "sha256": self.sha256, "changed": self.changed}


def _open_or_make_dir(parent: int, name: str, shown: str) -> int:
    try:
        return open_dir_at(parent, name)
    except FileNotFoundError:
        pass
    except UnsafeEntry as e:
        raise InputError(WorkflowCode.WORKFLOW_PATH_UNSAFE, f"{shown} is not a directory of the repository ({e.strerror}): "
                         "the workflow is never written through a link", shown) from e
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass  # made meanwhile: opened (and judged) below
    try:
        return open_dir_at(parent, name)
    except UnsafeEntry as e:
        raise InputError(WorkflowCode.WORKFLOW_PATH_UNSAFE, f"{shown} is not a directory of the repository ({e.strerror})",
                         shown) from e


def write_workflow(repo_dir: str | os.PathLike[str], options: WorkflowOptions, *, force: bool = False) -> WrittenWorkflow:
    """Write :func:`render_workflow` of ``options`` to ``REPO/.github/workflows/attest-review.yml``.

    Through descriptors: ``.github`` and ``.github/workflows`` are opened (made, 0755, when
    missing) without following a link, and the file is created new, or replaced atomically (a
    temp file, fsync, rename) only with ``force``. The same bytes there already: nothing is
    written (``changed`` false).

    Raises:
        InputError: ``UNREADABLE`` (``repo_dir`` is not a directory), ``WORKFLOW_PATH_UNSAFE`` (a
            link or another kind of entry on the way or at the file), ``WORKFLOW_EXISTS`` (another
            file is there and ``force`` is false), ``BAD_OUTPUT_PATH`` (it cannot be written).
    """
    data = render_workflow(options).encode("utf-8")
    digest = sha256_of(data)
    repo = os.fspath(repo_dir)
    target = os.path.join(os.path.abspath(repo), WORKFLOW_PATH)
    try:
        top = os.open(repo, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=AT_FDCWD)
    except OSError as e:
        raise InputError(CommonCode.UNREADABLE, f"--repo is not a directory that can be opened: {e.strerror}", repo) from e
    fds = [top]
    try:
        try:
            fds.append(_open_or_make_dir(fds[-1], ".github", os.path.join(repo, ".github")))
            fds.append(_open_or_make_dir(fds[-1], "workflows", os.path.join(repo, ".github", "workflows")))
        except OSError as e:
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot make the workflow's directory: {e.strerror}", target) from e
        here = fds[-1]
        name = posixpath.basename(WORKFLOW_PATH)
        existing: bytes | None = None
        try:
            fd, _ = open_regular_at(here, name)
        except FileNotFoundError:
            fd = -1
        except UnsafeEntry as e:
            raise InputError(WorkflowCode.WORKFLOW_PATH_UNSAFE, f"the workflow's path is not a plain regular file ({e.strerror}): "
                             "remove it; it is never written through a link", target) from e
        if fd >= 0:
            try:
                existing = _read_all(fd, limit=4 * len(data) + 65536)
            finally:
                os.close(fd)
        if existing == data:
            return WrittenWorkflow(target, digest, False)
        try:
            if existing is None:
                create_at(here, name, data, mode=0o644)
            elif force:
                replace_at(here, name, data, mode=0o644)
            else:
                raise InputError(WorkflowCode.WORKFLOW_EXISTS, "another workflow is there (sha256:"
                                 f"{hashlib.sha256(existing).hexdigest()}); --force replaces it", target)
        except FileExistsError as e:
            raise InputError(WorkflowCode.WORKFLOW_EXISTS, "a workflow appeared there while this one was written; run again",
                             target) from e
        except InputError:
            raise
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT):
                raise
            raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot write the workflow there: {e.strerror}", target) from e
        return WrittenWorkflow(target, digest, True)
    finally:
        for fd in reversed(fds):
            os.close(fd)


def _read_all(fd: int, *, limit: int) -> bytes:
    """The file's bytes, at most ``limit`` (a bigger file is another workflow anyway: only equality is asked)."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit and (chunk := os.read(fd, 1 << 16)):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def options_from(*, labels: Sequence[str], checks: Sequence[str], **values: str | None) -> WorkflowOptions:
    """:class:`WorkflowOptions` from the command line's values (``None``: the default).

    Raises:
        InputError: ``WORKFLOW_BAD_OPTION``.
    """
    given = {k: v for k, v in values.items() if v is not None}
    return WorkflowOptions(runner_labels=tuple(labels) if labels else DEFAULT_RUNNER_LABELS, required_checks=tuple(checks),
                           **given)


__all__ = [
    "APP_TOKEN",
    "CHECKOUT",
    "DEFAULT_ENVIRONMENT",
    "WORKFLOW_PATH",
    "WorkflowCode",
    "WorkflowOptions",
    "WrittenWorkflow",
    "render_workflow",
    "write_workflow",
]
