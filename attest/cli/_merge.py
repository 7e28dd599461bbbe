"""`attest merge-gate check` (a complete review for the exact head, plus exact-head CI) and `merge-gate ci-result`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from ._app import JsonOption, ReportedFailure, checked_output, existing_directory, new_group, option, print_json


def register(app: typer.Typer) -> None:
    sub = new_group("merge-gate", "Merge authorization: a complete signed review of the exact head, and exact-head CI, never a provider review alone.")
    sub.command("check")(check)
    sub.command("ci-result")(ci_result)
    app.add_typer(sub, name="merge-gate")


def check(
    record: Path = option(..., "--record", metavar="FILE", help="The signed review record `attest review serialize` wrote."),
    policy: Path = option(..., "--policy", metavar="FILE", help="The deployment's trust policy (TRUST): who may sign review records and CI results."),
    ci: list[Path] = option([], "--ci", metavar="FILE", help="A signed CI result (`attest merge-gate ci-result`). Repeatable."),
    require_check: list[str] = option([], "--require-check", metavar="NAME", help="A CI check that must have succeeded "
                                            "for the exact head. Repeatable; at least one."),
    identity: Optional[Path] = option(None, "--identity", metavar="FILE", help="Offline host adapter: the identity JSON file (its format: docs/bootstrap.md, "
                                            "\"The identity file\"; exactly one of --identity or --github)."),
    github: Optional[str] = option(None, "--github", metavar="OWNER/NAME", help="GitHub host adapter: the repository, read "
                                         "from the REST API (needs --pr)."),
    pr: Optional[int] = option(None, "--pr", metavar="N", help="With --github: the pull request number."),
    token_env: Optional[str] = option(None, "--token-env", metavar="NAME", help="With --github: the environment variable "
                                            "holding the API token, never printed."),
    api_url: Optional[str] = option(None, "--api-url", metavar="URL", help="With --github: REST API base URL."),
    trusted_producer_app: Optional[str] = option(None, "--trusted-producer-app", metavar="LOGIN", help="With --github: also "
                                                       "require `attest evidence trusted-producer` evidence from this App login."),
    state_dir: Path = option(..., "--state-dir", metavar="DIR", help="The deployment's state directory, always read: every "
                                   "review record (each must verify) and every review run there of this head counts (one with "
                                   "blocking findings, or still running, keeps the head blocked, whatever record is given)."),
    json_mode: bool = JsonOption,
) -> None:
    """Authorize a merge only for a complete review record of the exact current head plus its CI (exit 0), else explain (exit 1)."""
    import os

    from ..attestation import load_policy
    from ..errors import InputError, VerificationError
    from ..review.bootstrap import BootstrapCode, host_adapter
    from ..review.merge import merge_gate_check

    host = host_adapter(identity=identity, github=github, pr=pr, token_env=token_env, api_url=api_url, environ=os.environ)
    producer: Any = None
    if trusted_producer_app is not None:
        if github is None or pr is None:
            raise InputError(BootstrapCode.BAD_HOST_OPTIONS, "--trusted-producer-app reads the GitHub API: it needs --github and --pr")
        from ..review.evidence import DEFAULT_API_URL, DEFAULT_JOB, DEFAULT_WORKFLOW, GitHubClient, HttpLimits, TrustConfig
        from ..review.merge import github_trusted_producer

        config = TrustConfig(repo=github, pr=pr, app_login=trusted_producer_app, workflow=DEFAULT_WORKFLOW, job=DEFAULT_JOB)
        token = os.environ.get(token_env) if token_env else None
        producer = github_trusted_producer(config, GitHubClient(api_url or DEFAULT_API_URL, token=token, limits=HttpLimits()))

    existing_directory(state_dir)
    gate = merge_gate_check(record=record, policy=load_policy(policy), host=host, ci=ci, required_checks=require_check,
                            state_dir=state_dir, trusted_producer=producer)
    doc = gate.to_json()
    lines = [f"{'AUTHORIZED' if gate.authorized else 'NOT AUTHORIZED'}: review {gate.record.review} ({gate.record.status}) "
             f"for head {gate.head}"]
    lines += [f"  {f.code}: {f.detail}" for f in gate.findings]
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
    from ..attestation import load_signer
    from ..review.merge import ci_result_predicate, sign_ci_result

    predicate = ci_result_predicate(repository_id=repository_id, full_name=full_name, head=head, base=base, check=check_name,
                                    conclusion=conclusion, run=run)
    signers = [load_signer(k) for k in key]
    path, digest = sign_ci_result(predicate, signers if len(signers) > 1 else signers[0], out)
    if json_mode:
        print_json({"ok": True, "output": path, "attestation_digest": digest, **predicate})
        return
    print(f"SIGNED CI result {check_name}={conclusion} for {full_name} head {head} (base {base}): {path} ({digest})")


__all__ = ["register"]
