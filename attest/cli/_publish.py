"""`attest review publish`: post a signed record's review payload to the GitHub pull request, exactly once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ._app import JsonOption, option, print_json

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.review.platform +0.32 s, attest.review.bootstrap +0.29 s, attest.attestation +87 ms, over the app's own
# 60 ms (-X importtime after build_app(), median of 5).


def publish_review(
    record: Path = option(..., "--record", metavar="FILE", help="The signed review record `attest review serialize` wrote."),
    payload: Path = option(..., "--payload", metavar="FILE", help="The review payload written with it (-o of serialize): its "
                                "bytes must be the record's subject."),
    policy: Path = option(..., "--policy", metavar="FILE", help="The deployment's trust policy (TRUST) the record must verify under."),
    github: str = option(..., "--github", metavar="OWNER/NAME", help="The repository on GitHub."),
    pr: int = option(..., "--pr", metavar="N", help="The pull request number."),
    token_env: Optional[str] = option(None, "--token-env", metavar="NAME", help="The environment variable holding the "
                                            "deployment's token (pull requests: write), never printed [default: GITHUB_TOKEN, "
                                            "only for the default API URL]."),
    api_url: Optional[str] = option(None, "--api-url", metavar="URL", help="REST API base URL [default: https://api.github.com]."),
    app_login: Optional[str] = option(None, "--app-login", metavar="LOGIN", help="The login the token posts as (the App's "
                                            "`<slug>[bot]`): a review by anyone else carrying this record's marker is ignored."),
    json_mode: bool = JsonOption,
) -> None:
    """Post the record's review to the pull request once (a second run finds it), then read it back (exit 0), else explain."""
    from ..attestation import load_policy  # lazy
    from ..review.bootstrap import GitHubIdentity, host_adapter  # lazy
    from ..review.platform import publish_review as publish  # lazy

    host = host_adapter(identity=None, github=github, pr=pr, token_env=token_env, api_url=api_url, environ=os.environ)
    assert isinstance(host, GitHubIdentity)  # --github is required, so the adapter is GitHub's
    done = publish(record=record, payload=payload, policy=load_policy(policy), host=host,
                   app_login=app_login)
    if json_mode:
        print_json(done.to_json())
        return
    verb = "PUBLISHED" if done.posted else "ALREADY PUBLISHED"
    print(f"{verb}: review {done.review_id} ({done.state}) on {done.full_name} pull request {done.number}, head {done.commit_id}")
    print(f"  record {done.record_digest}; note {done.note}")


__all__ = ["publish_review"]
