"""`attest install skill`: install the promoted skill and sign its installation attestation."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .._plural import count
from ._app import JsonOption, StateDirOption, new_group, option, print_json, state_to_read

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.builder +0.3 s, attest.attestation +87 ms, over the app's own 60 ms (-X importtime after build_app(),
# median of 5).


def register(app: typer.Typer) -> None:
    install_app = new_group("install", "Install promoted artifacts for a deployment.")
    install_app.command("skill")(install_skill)
    app.add_typer(install_app, name="install")


def install_skill(
    pins: Path = option(..., "--pins", metavar="FILE", help="Deployment pins written by `attest promote` (its [skill] table names the skill)."),
    state_dir: Optional[Path] = StateDirOption,
    dest: Path = option(..., "--dest", metavar="DIR", help="The installed root (absent or an empty directory; outside the state directory "
                              "and every git repository), for example ~/.agents/skills/agent-policy."),
    key: list[str] = option(..., "--key", metavar="KEY", help="Deployment signing key (PEM or signer URI) for the "
                                  "installation attestation. Repeatable: one DSSE envelope with one signature per key."),
    policy: Optional[Path] = option(None, "--policy", metavar="FILE", help="The trust policy (TRUST of `attest bootstrap`) the "
                                          "promotion log beside PINS verifies under; needed when PINS has a log."),
    log_checkpoint: Optional[str] = option(None, "--log-checkpoint", metavar="CHECKPOINT",
                                           help="A first use's checkpoint SEQ:sha256:HEX of the promotion log (as `attest promote "
                                                "--verify-log` prints it), instead of trusting the log on first use."),
    json_mode: bool = JsonOption,
) -> None:
    """Copy the promoted skill image into DEST and write a signed installation attestation outside it.

    The state directory holds the promoted skill's image and build attestation (`attest promote`);
    the installation attestation is written under STATE/installations/.
    """
    from ..attestation import load_policy, load_signer, signing_keys  # lazy
    from ..builder import install_skill as install  # lazy

    state = state_to_read(state_dir, made_by="`attest promote`")
    # Every key is opened and the set checked (no key twice) before anything is copied.
    signers = signing_keys([load_signer(k) for k in key], "dsse")
    trust = load_policy(policy) if policy is not None else None
    result = install(pins, state, dest, signers, policy=trust, log_checkpoint=log_checkpoint)
    if json_mode:
        print_json(result.to_json())
        return
    claim = result.claim
    print(f"INSTALLED {claim.name} at {result.installed_root}")
    print(f"  image:        {result.image}")
    print(f"  inventory:    {claim.inventory.identity} ({count(len(claim.inventory.entries), 'entry')})")
    print(f"  source:       {claim.source_repository} @ {claim.source_revision}")
    print(f"  installer:    {claim.installer_repository} @ {claim.installer_revision}")
    print(f"  attestation:  {result.attestation} ({result.attestation_digest})")
    head = result.promotion_log.head if result.promotion_log is not None else None
    print(f"  promotion log: {f'entry {head.sequence} ({head.digest}), remembered' if head is not None else 'none beside the pins'}")


__all__ = ["register"]
