"""`attest review start`, `recheck`, `exec` (the review step from the handoff's four images) and `stand-in` (docs/review.md)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..errors import CommonCode, EnvironmentFailure, InputError, VerificationError
from ._agent import agent_command
from ._app import (
    JsonOption,
    ReportedFailure,
    StateDirOption,
    argument,
    checked_output,
    digest_option,
    flag,
    new_group,
    option,
    print_json,
    state_outside_repository,
    state_to_read,
    state_to_write,
)
from ._freeze import EnvOption, parse_env_options
from ._publish import publish_review

if TYPE_CHECKING:
    from ..review.procedure import AuthorityChangeDoc, RunOptions

# The library modules are imported where a command needs them (each `# lazy:`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and importing
# attest.review.procedure costs +0.5-0.8 s over that (attest.review.bootstrap +0.3 s, attest.attestation +0.16 s,
# attest.review.handoff +80 ms; -X importtime, best of 5), against about 0.2 s for the whole app.


def register(app: typer.Typer) -> None:
    sub = new_group("review", "After `attest bootstrap`: run the review step from the handoff's frozen images only.")
    sub.command("start")(start_review)
    sub.command("recheck")(recheck_review)
    sub.command("serialize")(serialize_review)
    sub.command("exec", context_settings={"allow_interspersed_args": False})(exec_review)
    sub.command("agent", context_settings={"allow_interspersed_args": False})(agent_command)
    sub.command("publish")(publish_review)
    sub.command("stand-in")(stand_in)
    app.add_typer(sub, name="review")


def start_review(
    handoff: Path = option(..., "--handoff", metavar="FILE", help="The signed handoff written by `attest bootstrap`."),
    policy: Path = option(..., "--policy", metavar="FILE", help="The deployment's trust policy (TRUST) the handoff must verify under."),
    state_dir: Optional[Path] = StateDirOption,
    repo: Path = option(..., "--repo", metavar="GITDIR", help="The repository under review (GITDIR): objects only, never a worktree."),
    semantic: str = option(..., "--semantic", metavar="PATH", help="The semantic projection: a configured policy-context-md output path of "
                                 "the trusted base, exactly as configured."),
    adapter: str = option(..., "--adapter", metavar="PATH", help="The adapter projection: a configured adapter output path of the trusted "
                                "base (github-review-json-adapter-v1), exactly as configured, of the same context."),
    identity: Optional[Path] = option(None, "--identity", metavar="FILE", help="Offline host adapter: the identity JSON file (its format: docs/formats.md, "
                                            "\"Identity file\"; exactly one of --identity or --github)."),
    github: Optional[str] = option(None, "--github", metavar="OWNER/NAME", help="GitHub host adapter: OWNER/NAME of the repository, read from the "
                                         "REST API (needs --pr)."),
    pr: Optional[int] = option(None, "--pr", metavar="N", help="With --github: the pull request number."),
    token_env: Optional[str] = option(None, "--token-env", metavar="NAME", help="With --github: NAME of the environment variable holding the "
                                            "API token, never printed (default: GITHUB_TOKEN if set, and only for the default --api-url)."),
    api_url: Optional[str] = option(None, "--api-url", metavar="URL", help="With --github: REST API base URL (default https://api.github.com)."),
    json_mode: bool = JsonOption,
) -> None:
    """Verify the handoff and the host's identities, the merge base and changed surface; bind and retain the projections."""
    # lazy: +0.16 to +0.8 s to the whole app (see above)
    from ..attestation import load_policy
    from ..review.bootstrap import host_adapter  # lazy
    from ..review.procedure import review_start  # lazy

    host = host_adapter(identity=identity, github=github, pr=pr, token_env=token_env, api_url=api_url, environ=os.environ)
    state_outside_repository(state_to_write(state_dir), repo)
    state = state_to_read(state_dir, made_by="`attest bootstrap`", decides_review=True)
    start = review_start(handoff=handoff, policy=load_policy(policy), state_dir=state, repo=repo, host=host,
                         semantic=semantic, adapter=adapter)
    doc = start.to_json()
    if json_mode:
        print_json(doc)
        return
    print(f"STARTED review {doc['review']} of {doc['repository']['full_name']} pull request {doc['pull_request']['number']}")
    print(f"  base:       {doc['base']['commit']} (tree {doc['base']['tree']})")
    print(f"  head:       {doc['head']}")
    print(f"  merge base: {doc['merge_base']} ({doc['changed_paths']} changed path(s))")
    for role, kept in doc["projections"].items():
        print(f"  {role + ':':<11} {kept['path']} ({kept['sha256']}, retained)")
    print("\n".join(_authority_lines(doc["authority_changes"], "  authority:  ")))
    print(f"  state:      {doc['state']}")


def _authority_lines(changes: Sequence[AuthorityChangeDoc], label: str) -> list[str]:
    """The human-readable lines of a review's authority changes: a count, then one line each (kind, status, path)."""
    if not changes:
        return [f"{label}the head changes none of the base's authority material"]
    return [f"{label}the head changes the base's authority material ({len(changes)} change(s), each a blocking "
            "finding of attest's: a person merges this, never the gate)"] + \
           [f"    {c['kind']:<8} {c['status']:<12} {c['path']}" for c in changes]


def recheck_review(
    state_dir: Optional[Path] = StateDirOption,
    review: str = option(..., "--review", metavar="ID", help="The review id `attest review start` (or a refresh) printed."),
    token_env: Optional[str] = option(None, "--token-env", metavar="NAME", help="With a --github review: NAME of the environment variable "
                                            "holding the API token, never printed or recorded (default: GITHUB_TOKEN if set, and "
                                            "only for the default API URL)."),
    json_mode: bool = JsonOption,
) -> None:
    """Re-resolve a started review and decide proceed, refresh, restart or fail (exit 0 for proceed and refresh, 1 otherwise)."""
    from ..review.procedure import recheck_review as recheck  # lazy: +0.5-0.8 s to the whole app (see above)

    got = recheck(state_dir=state_to_read(state_dir, made_by="`attest review start`", decides_review=True), review=review, token_env=token_env, environ=os.environ)
    doc = got.to_json()
    lines = [f"{got.outcome.outcome.upper()} review {got.state.review}: {got.outcome.reason}"]
    lines += [f"  {f.code}: {f.detail}" for f in got.outcome.findings if f.code != got.outcome.reason or len(got.outcome.findings) > 1]
    current = doc["current"]
    if got.outcome.outcome == "refresh" and current is not None:  # a refresh always names the refreshed review
        lines.append(f"  refreshed: review {got.current_review} (generation {current['generation']}, "
                     f"{doc['changed_paths']} changed path(s)); review {got.state.review} and every analysis of it are stale")
    elif got.outcome.outcome == "restart":
        lines.append("  discarded: run `attest bootstrap` again; nothing of the old root is reused")
    if not got.outcome.ok:
        raise ReportedFailure(VerificationError(findings=got.outcome.findings), document={**doc, "errors": doc["findings"]}, text="\n".join(lines) + "\n")
    if json_mode:
        print_json(doc)
        return
    print("\n".join(lines))


def exec_review(
    command: list[str] = argument(metavar="CMD...", help="The reviewer command and its arguments (after --). It finds the images in "
                                        "$ATTEST_IMAGE_BOOTSTRAP, _RUNTIME, _BASE and _PROCEDURE (with --review also _CHANGE and "
                                        "$ATTEST_REVIEW_SEMANTIC/_ADAPTER; with --reviewer _REVIEWER) and prints the result on "
                                        "stdout (docs/review.md \"The reviewer's inputs\")."),
    handoff: Path = option(..., "--handoff", metavar="FILE", help="The signed handoff written by `attest bootstrap`."),
    policy: Path = option(..., "--policy", metavar="FILE", help="The deployment's trust policy (TRUST) the handoff must verify under."),
    state_dir: Optional[Path] = StateDirOption,
    out: Path = option(..., "-o", "--output", metavar="FILE", help="Where to write the reviewer's result (only if it is a valid result).", callback=checked_output),
    env: list[str] = EnvOption,
    readonly: list[Path] = option([], "--readonly", metavar="DIR", help="A host directory the confined reviewer may also read "
                                        "(its own program, for example). Repeatable. The images and the "
                                        "system programs and libraries (never the host's /etc) are always there."),
    network: bool = flag("--network", help="Let the confined reviewer use the host's network (default: none)."),
    unsafe_unconfined: bool = flag("--unsafe-unconfined", help="UNSAFE: run the reviewer unconfined, as you, "
                                           "seeing the host (its files, processes, keys). Recorded in --json."),
    review: Optional[str] = option(None, "--review", metavar="ID", help="The started review (`attest review start`) this "
                                         "run analyses: it must be open and of this handoff, and is run once (a second run "
                                         "is refused); the reviewer gets REVIEW_ID, REVIEW_HEAD and REVIEW_MERGE_BASE, and the "
                                         "outcome is recorded for `review serialize`."),
    reviewer: Optional[str] = option(None, "--reviewer", metavar="IMAGE", help="With --review: the deployment's reviewer program, "
                                           "an image it attested and froze (`attest attest`, `attest freeze`), by identity "
                                           "(sha256:<hex>); mounted at $ATTEST_IMAGE_REVIEWER, and a relative program "
                                           "(bin/review) runs from it."),
    reviewer_attestation: Optional[Path] = option(None, "--reviewer-attestation", metavar="FILE", help="The signed closed-tree "
                                                        "attestation of --reviewer, verified under --policy."),
    json_mode: bool = JsonOption,
) -> None:
    """Verify the handoff, run the reviewer confined, from its frozen images only, and keep its provider-neutral result."""
    # lazy: +80 ms to +0.8 s to the whole app (see above)
    from ..attestation import load_policy
    from ..review.handoff import run_review_step  # lazy
    from ..review.procedure import run_review  # lazy

    state = state_to_read(state_dir, made_by="`attest bootstrap`", decides_review=True)
    passed, setting = parse_env_options(env)
    sys.stdout.flush()
    if unsafe_unconfined:
        sys.stderr.write("attest: WARNING: --unsafe-unconfined: the reviewer runs as you and sees the host\n")
    options: RunOptions = {"pass_env": passed, "readonly": [str(p) for p in readonly], "network": network,
                           "unsafe_unconfined": unsafe_unconfined}
    if review is not None:
        digest_option(reviewer, what="--reviewer")
        run = run_review(state_dir=state, review=review, handoff=handoff, policy=load_policy(policy), argv=command,
                         reviewer=reviewer, reviewer_attestation=reviewer_attestation, out=out, set_env=setting, **options)
    elif reviewer is not None or reviewer_attestation is not None:
        raise InputError(CommonCode.USAGE, "--reviewer and --reviewer-attestation need --review (the started review the "
                         "reviewer analyses)")
    else:
        run = run_review_step(handoff, load_policy(policy), state, command, out=out, set_env=setting, **options)
    if json_mode:
        print_json(run.to_json())
        return
    doc = run.to_json()
    state = "complete" if run.result.complete else "NOT complete"
    print(f"REVIEWED {run.handoff.full_name} pull request {run.handoff.number} at base {run.handoff.base_commit}: {state}, "
          f"{doc['findings']} finding(s), {doc['blocking']} blocking")
    for limitation in run.result.limitations:
        print(f"  limitation: {limitation}")
    c = run.confinement
    print(f"  confined: uid {c.uid}, network {c.network}" if c.confined else "  NOT confined (--unsafe-unconfined)")
    print(f"  result: {run.result_path} ({run.result_digest})")


def serialize_review(
    state_dir: Optional[Path] = StateDirOption,
    review: str = option(..., "--review", metavar="ID", help="The review id (after any refresh, the current one)."),
    result: Path = option(..., "--result", metavar="FILE", help="The result `attest review exec --review ID` wrote for this review."),
    out: Path = option(..., "-o", "--output", metavar="FILE", help="Where to write the GitHub review payload (only after proceed).", callback=checked_output),
    key: Path = option(..., "--key", metavar="KEY", help="The deployment's signing key for the review record (TRUST must allow it for "
                             "https://attest.dev/review-record/v1)."),
    record: Optional[Path] = option(None, "--record", metavar="FILE", help="Also write the signed review record here (it is always "
                                          "written to STATE/records/ID.json).", callback=checked_output),
    token_env: Optional[str] = option(None, "--token-env", metavar="NAME", help="With a --github review: NAME of the environment variable "
                                            "holding the API token, never printed or recorded."),
    json_mode: bool = JsonOption,
) -> None:
    """Recheck, then turn the review's result into a GitHub review payload and a signed review record for the exact head."""
    # lazy: +0.16 and +0.8 s to the whole app (see above); review.handoff adds nothing to review.procedure's
    from ..attestation import load_signer
    from ..review.handoff import HandoffCode  # lazy
    from ..review.procedure import serialize_review as serialize  # lazy

    done = serialize(state_dir=state_to_read(state_dir, made_by="`attest review start`", decides_review=True), review=review, result=result, out=out, signer=load_signer(str(key)), record=record,
                     token_env=token_env, environ=os.environ)
    doc = done.to_json()
    lines = [f"SERIALIZED review {done.review}: {done.status.upper()} for head {done.head} (recheck: proceed)",
             f"  event:    {done.event}; {done.inline} inline comment(s), {done.in_body} finding(s) in the body, {done.blocking} blocking",
             f"  payload:  {done.payload_path} ({done.payload_digest})",
             f"  record:   {done.record_path} ({done.record_digest})", *_authority_lines(doc["authority_changes"], "  authority: ")]
    if done.status == "failed":  # written, so the host can say so, and still a failure: exit 1
        error = EnvironmentFailure(HandoffCode.REVIEWER_FAILED, "the review failed; its record says so and authorizes nothing")
        raise ReportedFailure(error, document={**doc, "ok": False, "errors": [f.to_json() for f in error.findings]},
                              text="\n".join(lines) + "\n")
    if json_mode:
        print_json(doc)
        return
    print("\n".join(lines))


def stand_in() -> None:
    """The demo's stand-in reviewer: reads SKILL.md and its references from $ATTEST_IMAGE_PROCEDURE, reviews nothing, says so."""
    from ..review.handoff import stand_in_review  # lazy: +80 ms to the whole app (see above)

    # The provider-neutral result itself (read strictly by `review exec`), not a --json report: no "schema".
    print(json.dumps(stand_in_review(os.environ).to_json(), sort_keys=True, ensure_ascii=False))


__all__ = ["register"]
