"""`attest evidence trusted-producer` and `attest evidence wrap` (docs/evidence.md).

Neither command exits on its own: a failure is raised as :class:`ReportedFailure`, carrying
the command's documented ``--json`` object, and ``attest.cli.main`` renders it and exits.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import AttestError, InputError, VerificationError
from ._app import JsonOption, ReportedFailure, checked_output, flag, new_group, option, print_json


def register(app: typer.Typer) -> None:
    sub = new_group("evidence", "Trusted review evidence from the hosting API, and the review wrapper's output contract.")
    sub.command("trusted-producer")(trusted_producer)
    sub.command("wrap")(wrap)
    app.add_typer(sub, name="evidence")


def trusted_producer(
    repo: str = option(..., "--repo", metavar="OWNER/NAME", help="OWNER/NAME of the base repository."),
    pr: int = option(..., "--pr", metavar="N", help="Pull request number."),
    app_login: str = option(..., "--app-login", metavar="LOGIN", help="Exact App bot login, including the [bot] suffix."),
    workflow: str = option(".github/workflows/opencode-code-review.yml", "--workflow", metavar="PATH", help="Path of the base-controlled review workflow."),
    job: str = option("opencode-review-same-repo", "--job", metavar="NAME", help="Job that must have succeeded in the exact attempt."),
    environment: str = option("attest-review-trusted", "--environment", metavar="NAME",
                              help="Protected environment holding the App's key: it must exist and restrict deployment branches."),
    bind_by_run_name: bool = flag("--bind-by-run-name", help="Also bind a run to the PR by its display title (run-name); weaker than the "
                                  "API's pull_requests association (docs/evidence.md)."),
    api_url: str = option("https://api.github.com", "--api-url", metavar="URL", help="Hosting API base URL (https; http only on loopback)."),
    token_env: Optional[str] = option(None, "--token-env", metavar="NAME", help="Name of the environment variable holding the API token (never printed)."),
    timeout: float = option(15.0, "--timeout", metavar="SECONDS", help="Seconds per socket operation."),
    max_pages: int = option(20, "--max-pages", metavar="N", help="Pages (of 100 items) read per listing before giving up as unknown."),
    json_mode: bool = JsonOption,
) -> None:
    """Decide whether PR has trusted-producer review evidence: true (exit 0), false or unknown (exit 1)."""
    # lazy: attest.review.evidence, +80-100 ms to building the whole app (-X importtime), which imports every command module
    from ..review.evidence import EvidenceCode, GitHubClient, HttpLimits, TrustConfig, evaluate

    try:
        config = TrustConfig(repo=repo, pr=pr, app_login=app_login, workflow=workflow, job=job, environment=environment,
                             bind_by_run_name=bind_by_run_name)
        token: str | None = None
        if token_env is not None:
            token = os.environ.get(token_env) or None
            if token is None:
                raise InputError(EvidenceCode.TOKEN_MISSING, f"the environment variable {token_env!r} named by --token-env is unset or empty")
        client = GitHubClient(api_url, token=token, limits=HttpLimits(timeout=timeout, deadline=max(60.0, 4 * timeout), max_pages=max_pages))
        verdict = evaluate(config, client)
    except AttestError as err:
        # Still one answer a caller can parse: a misconfiguration is never trusted.
        document = {"ok": False, "trusted_producer": "unknown", "reason_code": err.code, "reason": err.detail,
                    "errors": [f.to_json() for f in err.findings]}
        raise ReportedFailure(err, document=document) from None
    line = f"trusted_producer={verdict.trusted} {verdict.code}: {verdict.reason}\n"
    if not verdict.ok:  # false and unknown both fail closed (exit 1)
        raise ReportedFailure(VerificationError(verdict.code, verdict.reason), document=verdict.to_json(), text=line)
    if json_mode:
        print_json(verdict.to_json())
    else:
        sys.stdout.write(line)


def wrap(
    head_sha: str = option(..., "--head-sha", metavar="SHA", help="The exact head commit the review is for."),
    base_sha: str = option(..., "--base-sha", metavar="SHA", help="The exact base commit the run reviewed (BASE_SHA of BASE_SHA...HEAD_SHA)."),
    run_id: int = option(..., "--run-id", metavar="ID", help="GITHUB_RUN_ID of this workflow run."),
    run_attempt: int = option(..., "--run-attempt", metavar="N", help="GITHUB_RUN_ATTEMPT of this workflow run."),
    input_path: Optional[Path] = option(None, "--input", "-i", metavar="FILE", help="File holding the model's raw output (default: stdin)."),
    output: Optional[Path] = option(None, "--output", "-o", metavar="FILE", help="Also write the review JSON here (atomically).", callback=checked_output),
    json_mode: bool = JsonOption,
) -> None:
    """Turn the model's raw output into the exact-head review JSON; exit 1 after a diagnostic review."""
    # lazy: attest._fs, +5 ms, and attest.review.evidence, +80-100 ms, to building the whole app (-X importtime)
    from .._fs import write_atomic
    from ..review.evidence import MAX_OUTPUT_BYTES, EvidenceCode, wrap_failure, wrap_output  # lazy

    try:
        if input_path is None:
            raw = sys.stdin.buffer.read(MAX_OUTPUT_BYTES + 1)
        else:
            from .._safefs import read_regular  # lazy: +8-16 ms (-X importtime), for --input only

            raw = read_regular(input_path, MAX_OUTPUT_BYTES)  # a FIFO is refused, never waited on
    except OSError as e:
        result = wrap_failure(EvidenceCode.OUTPUT_UNREADABLE, f"the model output could not be read: {e.strerror or type(e).__name__}",
                              head_sha=head_sha, base_sha=base_sha, run_id=run_id, run_attempt=run_attempt)
    else:
        result = wrap_output(raw, head_sha=head_sha, base_sha=base_sha, run_id=run_id, run_attempt=run_attempt)
    review_json = json.dumps(result.review, sort_keys=True, ensure_ascii=False)
    if output is not None:
        write_atomic(output, review_json.encode("utf-8") + b"\n", what="review")
    if not json_mode:
        sys.stdout.write(review_json + "\n")  # a diagnostic review too: the job posts it, then fails
    if not result.ok:  # a diagnostic review (never clean): exit 1
        raise ReportedFailure(VerificationError(result.code, result.reason), document=result.to_json(),
                              text=f"attest: diagnostic review: {result.code}: {result.reason}\n")
    if json_mode:
        print_json(result.to_json())


__all__ = ["register"]
