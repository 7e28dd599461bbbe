"""`attest init github`: write a consumer repository's trusted review workflow (docs/github.md "attest init github")."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._app import JsonOption, flag, new_group, option, print_json

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.review.platform +0.32 s, over the app's own 60 ms (-X importtime after build_app(), median of 5).


def register(app: typer.Typer) -> None:
    sub = new_group("init", "Set a consumer repository up for attest's trusted review.")
    sub.command("github")(github)
    app.add_typer(sub, name="init")


def github(
    repo: Path = option(Path("."), "--repo", metavar="DIR", help="The consumer repository's checkout: the workflow is "
                        "written to DIR/.github/workflows/attest-review.yml."),
    runner_label: list[str] = option([], "--runner-label", metavar="LABEL", help="A label of the deployment's self-hosted "
                                     "runner. Repeatable [default: self-hosted, attest]."),
    attest: Optional[str] = option(None, "--attest", metavar="PATH", help="attest on the runner, an absolute path "
                                   "[default: /opt/attest/bin/attest]."),
    state_dir: str = option(..., "--state-dir", metavar="DIR", help="The deployment's state directory on the runner (absolute)."),
    pins: str = option(..., "--pins", metavar="FILE", help="The deployment's PINS on the runner (absolute)."),
    policy: str = option(..., "--policy", metavar="FILE", help="The deployment's trust policy (TRUST) on the runner (absolute)."),
    skill: str = option(..., "--skill", metavar="DIR", help="The installed agent-policy Skill on the runner (absolute)."),
    installation: str = option(..., "--installation", metavar="FILE", help="The Skill's installation attestation on the "
                               "runner (absolute)."),
    key: str = option(..., "--key", metavar="KEY", help="The deployment's signing key on the runner (absolute): it signs "
                      "the handoff and the review record, and never leaves the runner."),
    reviewer_image: Optional[str] = option(None, "--reviewer-image", metavar="IMAGE", help="The deployment's frozen reviewer "
                                           "image, sha256:<hex> (with --reviewer-attestation) [default: the stand-in reviewer]."),
    reviewer_attestation: Optional[str] = option(None, "--reviewer-attestation", metavar="FILE", help="Its signed "
                                                 "attestation on the runner (absolute)."),
    require_check: list[str] = option([], "--require-check", metavar="NAME", help="A CI check the merge gate requires for "
                                      "the exact head. Repeatable; at least one."),
    ci_dir: Optional[str] = option(None, "--ci-dir", metavar="DIR", help="Where the deployment's CI jobs keep signed CI "
                                   "results on the runner, DIR/<head>/*.json (absolute) [default: none, so the gate "
                                   "stays pending on CI]."),
    semantic: Optional[str] = option(None, "--semantic", metavar="PATH", help="The base's semantic projection "
                                     "[default: docs/review/policy-context.md]."),
    adapter: Optional[str] = option(None, "--adapter", metavar="PATH", help="The base's adapter projection "
                                    "[default: docs/review/github-review.json]."),
    backend: Optional[str] = option(None, "--backend", metavar="BACKEND", help="Immutability backend of the review's images "
                                    "on the runner: immutable, readonly or ro-bind [default: the runner's $ATTEST_BACKEND, "
                                    "else immutable]."),
    environment: Optional[str] = option(None, "--environment", metavar="NAME", help="The protected environment that holds "
                                        "the App's private key [default: attest-review-trusted]."),
    force: bool = flag("--force", help="Replace a different workflow file already there."),
    json_mode: bool = JsonOption,
) -> None:
    """Write .github/workflows/attest-review.yml: the base-controlled review, publish and merge-gate workflow."""
    from ..review.platform import options_from, write_workflow  # lazy

    options = options_from(labels=runner_label, checks=require_check, attest=attest, state_dir=state_dir, pins=pins,
                           policy=policy, skill=skill, installation=installation, key=key, reviewer_image=reviewer_image,
                           reviewer_attestation=reviewer_attestation, ci_dir=ci_dir, semantic=semantic, adapter=adapter,
                           backend=backend, environment=environment)
    written = write_workflow(repo, options, force=force)
    if json_mode:
        print_json(written.to_json())
        return
    print(f"{'WROTE' if written.changed else 'UNCHANGED'}: {written.path} ({written.sha256})")
    print("  next: the App, its environment and the branch rule (docs/github.md)")


__all__ = ["register"]
