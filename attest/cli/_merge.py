"""`attest merge-gate check` (a complete review for the exact head, plus exact-head CI) and `merge-gate ci-result`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..errors import AttestError, InputError, VerificationError
from ._app import JsonOption, ReportedFailure, StateDirOption, checked_output, flag, new_group, option, print_json, state_to_read

if TYPE_CHECKING:
    from ..review.merge import MergeGate, TrustedProducer
    from ..review.platform import GateStatus, GitHubPlatform

# The library modules below are imported where a command needs them (each `# lazy:`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and importing
# attest.review.merge or .platform costs +0.5-0.8 s over that (attest.review.bootstrap +0.3 s, attest.attestation
# +0.16 s; -X importtime, best of 5), against about 0.2 s for the whole app.

RecordOption = option(..., "--record", metavar="FILE", help="The signed review record `attest review serialize` wrote.")
PolicyOption = option(..., "--policy", metavar="FILE", help="The deployment's trust policy (TRUST): who may sign review records and CI results.")
CiOption = option([], "--ci", metavar="FILE", help="A signed CI result (`attest merge-gate ci-result`). Repeatable.")
RequireCheckOption = option([], "--require-check", metavar="NAME", help="A CI check that must have succeeded "
                            "for the exact head. Repeatable; at least one.")
PrOption = option(None, "--pr", metavar="N", help="With --github: the pull request number.")
TokenEnvOption = option(None, "--token-env", metavar="NAME", help="With --github: the environment variable "
                        "holding the API token, never printed.")
ApiUrlOption = option(None, "--api-url", metavar="URL", help="With --github: REST API base URL.")
TrustedProducerOption = option(None, "--trusted-producer-app", metavar="LOGIN", help="With --github: also "
                               "require `attest evidence trusted-producer` evidence from this App login.")


def register(app: typer.Typer) -> None:
    sub = new_group("merge-gate", "Merge authorization: a complete signed review of the exact head, and exact-head CI, never a provider review alone.")
    sub.command("check")(check)
    sub.command("merge")(merge)
    sub.command("ci-result")(ci_result)
    app.add_typer(sub, name="merge-gate")


def check(
    record: Path = RecordOption,
    policy: Path = PolicyOption,
    ci: list[Path] = CiOption,
    require_check: list[str] = RequireCheckOption,
    identity: Optional[Path] = option(None, "--identity", metavar="FILE", help="Offline host adapter: the identity JSON file (its format: docs/formats.md, "
                                            "\"Identity file\"; exactly one of --identity or --github)."),
    github: Optional[str] = option(None, "--github", metavar="OWNER/NAME", help="GitHub host adapter: the repository, read "
                                         "from the REST API (needs --pr); the gate then also requires no unresolved review "
                                         "thread, a mergeable pull request and the head unchanged on a final read."),
    pr: Optional[int] = PrOption,
    token_env: Optional[str] = TokenEnvOption,
    api_url: Optional[str] = ApiUrlOption,
    trusted_producer_app: Optional[str] = TrustedProducerOption,
    state_dir: Optional[Path] = StateDirOption,
    publish_status: bool = flag("--publish-status", help="With --github: post the decision as the `attest/merge-gate` commit "
                                "status on the exact head (success only when authorized; else failure, or pending when only "
                                "time can clear it), also when the gate cannot decide."),
    json_mode: bool = JsonOption,
) -> None:
    """Authorize a merge only for a complete review record of the exact current head plus its CI (exit 0), else explain (exit 1).

    The state directory is always read: every review record there (each must verify) and every review run there of
    this head counts (one with blocking findings, or still running, keeps the head blocked, whatever record is given).
    """
    from ..review.bootstrap import BootstrapCode  # lazy: +0.3 s to the whole app (see above)

    if publish_status and github is None:
        raise InputError(BootstrapCode.BAD_HOST_OPTIONS, "--publish-status posts to GitHub: it needs --github and --pr")
    gate, status = _run_gate(record=record, policy=policy, ci=ci, require_check=require_check, identity=identity, github=github,
                             pr=pr, token_env=token_env, api_url=api_url, trusted_producer_app=trusted_producer_app,
                             state_dir=state_dir, publish_status=publish_status)
    _render_gate(gate, status, json_mode)


def merge(
    record: Path = RecordOption,
    policy: Path = PolicyOption,
    ci: list[Path] = CiOption,
    require_check: list[str] = RequireCheckOption,
    github: str = option(..., "--github", metavar="OWNER/NAME", help="The repository on GitHub (needs --pr)."),
    pr: int = option(..., "--pr", metavar="N", help="The pull request number."),
    token_env: Optional[str] = TokenEnvOption,
    api_url: Optional[str] = ApiUrlOption,
    trusted_producer_app: Optional[str] = TrustedProducerOption,
    state_dir: Optional[Path] = StateDirOption,
    method: str = option("merge", "--method", metavar="METHOD", help="merge (a merge commit) or squash; never rebase."),
    json_mode: bool = JsonOption,
) -> None:
    """Run the gate on GitHub and, only when it authorizes, merge pinned to the exact head, then check the merge commit.

    The state directory is always read: every review record there (each must verify) and every review run there of
    this head counts (one with blocking findings, or still running, keeps the head blocked, whatever record is given).
    """
    from ..review.platform import PlatformCode, merge_pull_request  # lazy: +0.7 s to the whole app (see above)

    gate, _ = _run_gate(record=record, policy=policy, ci=ci, require_check=require_check, identity=None, github=github, pr=pr,
                        token_env=token_env, api_url=api_url, trusted_producer_app=trusted_producer_app, state_dir=state_dir,
                        publish_status=False)
    if not gate.authorized:
        _render_gate(gate, None, json_mode)  # raises: not authorized, nothing merged
    platform = _platform(github, pr, token_env, api_url)
    try:
        merged = merge_pull_request(gate, platform, base=gate.base, method=method)
    except VerificationError as e:
        # MERGE_COMMIT_MISMATCH: GitHub merged, but not (known to be) as reviewed; every other refusal merged nothing.
        merged_anyway = any(f.code == PlatformCode.MERGE_COMMIT_MISMATCH for f in e.findings)
        verdict = "MERGED, NOT AS REVIEWED" if merged_anyway else "NOT MERGED"
        raise ReportedFailure(e, document={"ok": False, "merged": merged_anyway, "head": gate.head,
                                           "errors": [f.to_json() for f in e.findings]},
                              text=f"{verdict}: head {gate.head}\n" + "".join(f"  {f.code}: {f.detail}\n" for f in e.findings)) from e
    if json_mode:
        print_json(merged.to_json())
        return
    print(f"MERGED: {github} pull request {pr}, head {merged.head} into base {merged.base} by {merged.method} commit {merged.sha}")
    print(f"  post-merge check: parents and tree ({merged.tree}) are the reviewed head merged into the base")


def _platform(github: str, pr: int, token_env: Optional[str], api_url: Optional[str]) -> GitHubPlatform:
    # lazy: +0.3 and +0.7 s to the whole app (see above)
    from ..review.bootstrap import GitHubIdentity, host_adapter
    from ..review.platform import GitHubPlatform  # lazy

    host = host_adapter(identity=None, github=github, pr=pr, token_env=token_env, api_url=api_url, environ=os.environ)
    assert isinstance(host, GitHubIdentity)  # --github given, so the adapter is GitHub's
    return GitHubPlatform.for_host(host)


def _run_gate(*, record: Path, policy: Path, ci: list[Path], require_check: list[str], identity: Optional[Path],
              github: Optional[str], pr: Optional[int], token_env: Optional[str], api_url: Optional[str],
              trusted_producer_app: Optional[str], state_dir: Optional[Path], publish_status: bool
              ) -> tuple[MergeGate, GateStatus | None]:
    """The gate's decision (and its posted status): the one call of merge_gate_check for check and merge."""
    # lazy: +0.16 to +0.8 s to the whole app (see above); review.evidence adds nothing to review.merge's
    from ..attestation import load_policy
    from ..review.bootstrap import BootstrapCode, host_adapter  # lazy
    from ..review.evidence import DEFAULT_API_URL, DEFAULT_JOB, DEFAULT_WORKFLOW, GitHubClient, HttpLimits, TrustConfig  # lazy
    from ..review.merge import github_trusted_producer, merge_gate_check  # lazy

    host = host_adapter(identity=identity, github=github, pr=pr, token_env=token_env, api_url=api_url, environ=os.environ)
    state = state_to_read(state_dir, made_by="`attest review start` and `attest review serialize`", decides_review=True)  # before any host request
    producer: TrustedProducer | None = None
    if trusted_producer_app is not None:
        if github is None or pr is None:
            raise InputError(BootstrapCode.BAD_HOST_OPTIONS, "--trusted-producer-app reads the GitHub API: it needs --github and --pr")
        config = TrustConfig(repo=github, pr=pr, app_login=trusted_producer_app, workflow=DEFAULT_WORKFLOW, job=DEFAULT_JOB)
        token = os.environ.get(token_env) if token_env else None
        producer = github_trusted_producer(config, GitHubClient(api_url or DEFAULT_API_URL, token=token, limits=HttpLimits()))
    platform = _platform(github, pr, token_env, api_url) if github is not None and pr is not None else None
    host_facts = None
    if platform is not None:
        from ..review.platform import github_gate_facts  # lazy: +35 ms to review.merge's, for --github only

        host_facts = github_gate_facts(platform)
    try:
        gate = merge_gate_check(record=record, policy=load_policy(policy), host=host, ci=ci, required_checks=require_check,
                                state_dir=state, trusted_producer=producer, host_facts=host_facts)
    except AttestError as e:
        if publish_status and platform is not None:
            _status_of_error(platform, e)
        raise
    status = None
    if publish_status and platform is not None:
        from ..review.platform import publish_gate_status  # lazy: as github_gate_facts

        status = publish_gate_status(platform, gate.head, gate.authorized, gate.findings)
    return gate, status


def _status_of_error(platform: GitHubPlatform, error: AttestError) -> None:
    """The gate could not decide: say so on the pull request's current head (failure), then the error goes on."""
    from ..review.platform import publish_gate_status  # lazy: +0.7 s to the whole app (see above)

    try:
        publish_gate_status(platform, platform.pull().head_sha, False, error.findings)
    except AttestError as e:
        error.findings = (*error.findings, *e.findings)  # the gate's own failure first; the status's after it


def _render_gate(gate: MergeGate, status: GateStatus | None, json_mode: bool) -> None:
    doc = gate.to_json()
    if status is not None:
        doc["status"] = status.to_json()
    lines = [f"{'AUTHORIZED' if gate.authorized else 'NOT AUTHORIZED'}: review {gate.record.review} ({gate.record.status}) "
             f"for head {gate.head}"]
    lines += [f"  {f.code}: {f.detail}" for f in gate.findings]
    if status is not None:
        lines.append(f"  status {status.to_json()['context']} = {status.state} on {status.sha}")
    if not gate.authorized:
        raise ReportedFailure(VerificationError(findings=gate.findings), document={**doc, "errors": doc["findings"]},
                              text="\n".join(lines) + "\n")
    if json_mode:
        print_json(doc)
        return
    print("\n".join(lines))


def ci_result(
    repository_id: int = option(..., "--repository-id", metavar="ID", help="The stable repository id."),
    full_name: str = option(..., "--full-name", metavar="OWNER/NAME", help="The repository's full name."),
    head: str = option(..., "--head", metavar="SHA", help="The exact head commit the check ran on (a full id)."),
    base: str = option(..., "--base", metavar="SHA", help="The pull request's base commit the check ran against (a full id): "
                             "the gate counts the result only while the reviewed base is this one."),
    check_name: str = option(..., "--check", metavar="NAME", help="The check's name, as the merge gate requires it."),
    conclusion: str = option(..., "--conclusion", metavar="CONCLUSION", help="success, failure, cancelled, skipped, timed_out, neutral, "
                                   "action_required or stale."),
    run: str = option(..., "--run", metavar="ID", help="Which CI run this was (its URL or id)."),
    key: list[str] = option(..., "--key", metavar="KEY", help="The CI signing key (TRUST must allow it for https://attest.dev/ci-result/v1). "
                                  "Repeatable: every key signs."),
    out: Path = option(..., "-o", "--output", metavar="FILE", help="Where to write the signed CI result.", callback=checked_output),
    json_mode: bool = JsonOption,
) -> None:
    """Sign one CI check's result for an exact head and base, for `attest merge-gate check --ci`."""
    # lazy: +0.16 and +0.8 s to the whole app (see above)
    from ..attestation import load_signer
    from ..review.merge import ci_result_predicate, sign_ci_result  # lazy

    predicate = ci_result_predicate(repository_id=repository_id, full_name=full_name, head=head, base=base, check=check_name,
                                    conclusion=conclusion, run=run)
    signers = [load_signer(k) for k in key]
    path, digest = sign_ci_result(predicate, signers if len(signers) > 1 else signers[0], out)
    if json_mode:
        print_json({"ok": True, "output": path, "attestation_digest": digest, **predicate})
        return
    print(f"SIGNED CI result {check_name}={conclusion} for {full_name} head {head} (base {base}): {path} ({digest})")


__all__ = ["register"]
