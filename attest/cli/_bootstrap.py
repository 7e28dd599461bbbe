"""`attest bootstrap`: the trusted review bootstrap, steps 1-9 (docs/bootstrap.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from ._app import (
    BackendOption,
    JsonOption,
    ReportedFailure,
    StateDirOption,
    checked_output,
    error_text,
    option,
    print_json,
    state_outside_repository,
    state_to_read,
    state_to_write,
    working,
)

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.review.bootstrap +0.29 s, over the app's own 60 ms (-X importtime after build_app(), median of 5).


def register(app: typer.Typer) -> None:
    app.command("bootstrap")(bootstrap)


def bootstrap(
    pins: Path = option(..., "--pins", metavar="FILE", help="Deployment pins written by `attest promote` (outside every repository and image; docs/formats.md \"Pins\")."),
    policy: Path = option(..., "--policy", metavar="FILE", help="The deployment's trust policy (TRUST): signers of the installation, runtime "
                                "and handoff attestations."),
    state_dir: Optional[Path] = StateDirOption,
    skill: Path = option(..., "--skill", metavar="DIR", help="The installed agent-policy Skill (a copy source only)."),
    installation: Path = option(..., "--installation", metavar="FILE", help="The Skill's installation attestation (ATT)."),
    repo: Path = option(..., "--repo", metavar="GITDIR", help="The repository under review (GITDIR): objects only, never a worktree."),
    identity: Optional[Path] = option(None, "--identity", metavar="FILE", help="Offline host adapter: the identity JSON file (its format: docs/formats.md, "
                                            "\"Identity file\"; exactly one of --identity or --github)."),
    github: Optional[str] = option(None, "--github", metavar="OWNER/NAME", help="GitHub host adapter: OWNER/NAME of the repository, read from the REST API "
                                         "(needs --pr)."),
    pr: Optional[int] = option(None, "--pr", metavar="N", help="With --github: the pull request number."),
    token_env: Optional[str] = option(None, "--token-env", metavar="NAME", help="With --github: NAME of the environment variable holding the API "
                                            "token, never printed (default: GITHUB_TOKEN if set, and only for the default --api-url; "
                                            "a named variable that is unset is an error)."),
    api_url: Optional[str] = option(None, "--api-url", metavar="URL", help="With --github: REST API base URL (default https://api.github.com; "
                                          "https, http only on loopback)."),
    key: list[str] = option(..., "--key", metavar="KEY", help="Deployment signing key (PEM or signer URI) for the handoff. "
                                  "Repeatable: every key signs the one envelope (for a threshold policy)."),
    out: Path = option(..., "-o", "--output", metavar="FILE", help="Where to write the signed handoff (HANDOFF).", callback=checked_output),
    log_checkpoint: Optional[str] = option(None, "--log-checkpoint", metavar="CHECKPOINT",
                                           help="A first use's checkpoint SEQ:sha256:HEX of the promotion log beside PINS (as `attest "
                                                "promote --verify-log` prints it), instead of trusting the log on first use."),
    backend: Optional[str] = BackendOption,
    json_mode: bool = JsonOption,
) -> None:
    """Authenticate the bootstrap Skill, freeze and verify the base, runtime and procedure, and sign the handoff."""
    from ..review.bootstrap import BootstrapError, host_adapter  # lazy
    from ..review.bootstrap import bootstrap as run  # lazy

    host = host_adapter(identity=identity, github=github, pr=pr, token_env=token_env, api_url=api_url, environ=os.environ)
    # Step 1 reads the promoted skill's image from the store: a missing state directory holds none.
    state = state_to_write(state_dir)
    state_outside_repository(state, repo)  # first: a default .attest-state in the pull request's checkout is refused as such
    state = state_to_read(state_dir, made_by="`attest promote` and `attest install skill`")
    try:
        with working("bootstrapping: steps 1-9", json_mode):
            result = run(pins=pins, trust=policy, state_dir=state, skill_dir=skill, installation=installation, repo=repo,
                         host=host, key=key, out=out, backend=backend, log_checkpoint=log_checkpoint)
    except BootstrapError as err:  # rendered by the one handler: {"ok": false, "step": N, "errors": [...]} or text
        text = error_text(err).replace("attest: ", f"attest: bootstrap at step {err.step}: ", 1)
        raise ReportedFailure(err, document=err.to_json(), text=text) from err
    if json_mode:
        print_json(result.to_json())
        return
    doc = result.to_json()
    print(f"BOOTSTRAPPED {doc['repository']['full_name']} pull request {doc['pull_request']['number']} at base {doc['base']['commit']}")
    for name, image in doc["images"].items():
        print(f"  {name + ':':<11} {image['identity']} ({image['backend']}) {image['path']}")
    print(f"  handoff:    {result.handoff} ({result.handoff_digest})")
    head = result.promotion_log.head if result.promotion_log is not None else None
    print(f"  pins:       {f'promotion log entry {head.sequence} ({head.digest}), remembered' if head else 'no promotion log'}")


__all__ = ["register"]
