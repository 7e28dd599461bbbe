"""`attest keygen`, `attest attest`, `attest sign`, `attest verify-attestation`, `attest verify`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from .._digest import sha256_of
from .._plural import count
from ..errors import CommonCode, InputError
from ._app import JsonOption, argument, checked_output, digest_option, flag, json_input, option, print_json, progress_bar

if TYPE_CHECKING:
    from ..attestation import Signer

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.attestation +87 ms, attest.inventory +16 ms, attest._fs (its tempfile) +3 ms, over the app's own 60 ms
# (-X importtime after build_app(), median of 5).


def register(app: typer.Typer) -> None:
    app.command("keygen")(keygen)
    app.command("attest")(attest)
    app.command("sign")(sign)
    app.command("verify-attestation")(verify_attestation)
    app.command("verify")(verify)


def keygen(
    kind: str = option("ed25519", "--type", metavar="TYPE", help="ed25519 or ecdsa-p256."),
    output: Path = option(..., "-o", "--output", metavar="FILE", help="Private key path KEY.pem (0600); KEY.pub.pem is written beside it."),
    json_mode: bool = JsonOption,
) -> None:
    """Generate a signing key: unencrypted PKCS#8 PEM and its public key; print its signer id (key:sha256:<hex>)."""
    from .._fs import check_output_path  # lazy
    from ..attestation import generate_key, load_signer, public_key_path  # lazy

    pub = public_key_path(output)
    for target in (output, pub):
        check_output_path(target, what="key file")
    generate_key(kind, output)
    # The id policies, [rebuilders] and promotion logs name the key by (SHA-256 of its SubjectPublicKeyInfo).
    signer_id = "key:sha256:" + load_signer(str(output)).key_id
    if json_mode:
        print_json({"ok": True, "private_key": str(output), "public_key": str(pub), "type": kind, "signer_id": signer_id})
    else:
        print(f"wrote {output} (private, 0600) and {pub}")
        print(f"signer id: {signer_id}")


def _load_signers(keys: list[str], public_key: Path | None) -> list[Signer]:
    from ..attestation import load_signer  # lazy

    if public_key is not None and len(keys) != 1:
        # Which of several keys it belongs to would be a guess: one KMS/HSM key per call.
        raise InputError(CommonCode.USAGE, "--public-key goes with exactly one key; add further keys with `attest sign --add`")
    return [load_signer(k, public_key=public_key) for k in keys]


def attest(
    path: Path = argument(metavar="PATH", help="Root of the tree to attest."),
    key: list[str] = option([], "--key", metavar="KEY", help="Private key: a PEM path or a securesystemslib key URI. "
                                  "Repeatable: one DSSE envelope with one signature per key."),
    public_key: Optional[Path] = option(None, "--public-key", metavar="FILE", help="Public key PEM for a KMS/HSM key URI (with one --key)."),
    output: Path = option(..., "-o", "--output", metavar="FILE", help="Attestation file to write (atomically).", callback=checked_output),
    fmt: str = option("dsse", "--format", metavar="FORMAT", help="dsse (DSSE envelope) or bundle (Sigstore bundle v0.3)."),
    name: Optional[str] = option(None, "--name", metavar="NAME", help="Subject name (default: the directory's name)."),
    ignore: list[str] = option([], "--ignore", metavar="PATTERN", help="gitignore-style pattern; recorded in the attested inventory. Repeatable."),
    sigstore: bool = flag("--sigstore", help="Keyless signing with Sigstore (needs the network; writes a bundle)."),
    identity_token: Optional[str] = option(None, "--identity-token", metavar="TOKEN", envvar="SIGSTORE_ID_TOKEN", help="OIDC identity token for --sigstore."),
    staging: bool = flag("--staging", help="Use the Sigstore staging instance with --sigstore."),
    json_mode: bool = JsonOption,
) -> None:
    """Inventory PATH and write a signed in-toto statement of it (closed-tree predicate)."""
    from .._fs import write_atomic  # lazy
    from ..attestation import KeylessSigner, closed_tree_statement, sign_statement, signing_keys  # lazy
    from ..inventory import inventory_tree  # lazy

    if sigstore == bool(key):
        raise InputError(CommonCode.USAGE, "give --key KEY (repeatable) or --sigstore: one of the two")
    # Keys are loaded and their number checked before the tree is hashed.
    signer = KeylessSigner(identity_token, staging) if sigstore else signing_keys(_load_signers(key, public_key), fmt)
    with progress_bar("hashing", json_mode) as progress:
        inv = inventory_tree(path, ignore=ignore, progress=progress)
    subject_name = name or path.resolve().name or "/"
    data = sign_statement(closed_tree_statement(subject_name, inv), signer, fmt="bundle" if sigstore else fmt)
    write_atomic(output, data, what="attestation")

    digest = sha256_of(data)
    if json_mode:
        print_json({"ok": True, "output": str(output), "subject": subject_name, "identity": inv.identity, "attestation_digest": digest})
    else:
        print(f"wrote {output}: subject {subject_name} {inv.identity}, attestation {digest}")


def sign(
    envelope: Path = argument(metavar="ENVELOPE", help="DSSE envelope (in-toto payload) to add signatures to."),
    add: list[str] = option(..., "--add", metavar="KEY", help="Key that signs the envelope's payload as it is: a PEM path "
                                  "or a securesystemslib key URI. Repeatable."),
    public_key: Optional[Path] = option(None, "--public-key", metavar="FILE", help="Public key PEM for a KMS/HSM key URI (with one --add)."),
    output: Path = option(..., "-o", "--output", metavar="FILE", help="Envelope to write (atomically); may be ENVELOPE itself.", callback=checked_output),
    json_mode: bool = JsonOption,
) -> None:
    """Add signatures to a DSSE envelope over its exact payload, so several parties can meet a threshold in turn.

    Checks nothing about trust; refuses a Sigstore bundle (one signature only), a key that
    has already signed, and more than 32 signatures.
    """

    from .._fs import read_bounded, write_atomic  # lazy
    from ..attestation import MAX_ATTESTATION_BYTES, add_signatures  # lazy

    signers = _load_signers(add, public_key)
    data = add_signatures(read_bounded(envelope, what="envelope", max_bytes=MAX_ATTESTATION_BYTES), signers)
    write_atomic(output, data, what="envelope")
    added = [s.key_id for s in signers]
    count = len(json.loads(data)["signatures"])
    digest = sha256_of(data)
    if json_mode:
        print_json({"ok": True, "output": str(output), "added": added, "signatures": count, "attestation_digest": digest})
    else:
        print(f"wrote {output}: added {len(added)} signature(s) ({', '.join(added)}), {count} in all, attestation {digest}")


def verify_attestation(
    file: Path = argument(metavar="FILE", help="DSSE envelope or Sigstore bundle."),
    policy: Path = option(..., "--policy", metavar="FILE", help="Trust policy (TOML), read only from this path."),
    artifact: Optional[Path] = option(None, "--artifact", metavar="FILE", help="For a message-signature bundle: the signed artifact."),
    json_mode: bool = JsonOption,
) -> None:
    """Verify an attestation's signatures under a trust policy (offline) and print the verified statement.

    No tree is read: this checks who signed FILE, not what it describes. To also check that a
    tree is exactly the one a closed-inventory attestation describes, use `attest verify PATH
    --attestation FILE`, which first verifies FILE exactly as this command does.
    """
    from .._fs import read_bounded  # lazy
    from ..attestation import MAX_ATTESTATION_BYTES, load_policy, verify_artifact_bundle, verify_attestation_file  # lazy

    json_input(file, what="attestation", max_bytes=MAX_ATTESTATION_BYTES)
    pol = load_policy(policy)
    if artifact is not None:
        bundle = read_bounded(file, what="bundle", max_bytes=MAX_ATTESTATION_BYTES)
        data = read_bounded(artifact, what="artifact", max_bytes=MAX_ATTESTATION_BYTES)
        signers = verify_artifact_bundle(bundle, data, pol)
        if json_mode:
            print_json({"ok": True, "signers": list(signers), "artifact": str(artifact)})
        else:
            print(f"OK: {artifact} is signed by {', '.join(signers)}")
        return
    v = verify_attestation_file(file, pol)
    if json_mode:
        print_json({"ok": True, **v.to_json(), "statement": v.statement})
        return
    sys.stderr.write(f"OK: {v.format} verified by {', '.join(v.signers)}; predicate {v.predicate_type}\n")
    print(json.dumps(v.statement, indent=2, sort_keys=True, ensure_ascii=False))


def verify(
    path: Path = argument(metavar="PATH", help="Root of the tree to verify."),
    attestation: Path = option(..., "--attestation", metavar="FILE", help="DSSE envelope or bundle whose predicate carries a closed "
                                     "inventory (closed-tree, runtime or installation)."),
    policy: Path = option(..., "--policy", metavar="FILE", help="Trust policy (TOML), read only from this path, never from inside PATH."),
    attestation_digest: Optional[str] = option(None, "--attestation-digest", metavar="DIGEST", help="Pin: the attestation file must have this sha256:<hex>."),
    summary: Optional[Path] = option(None, "--summary", metavar="FILE", help="Write a signed SLSA VSA (PASSED or FAILED) here; needs --key."),
    key: list[str] = option([], "--key", metavar="KEY", help="Key that signs the --summary (one)."),
    summary_format: str = option("dsse", "--summary-format", metavar="FORMAT", help="dsse or bundle, for --summary."),
    json_mode: bool = JsonOption,
) -> None:
    """Exit 0 only if the attestation verifies under the policy and PATH matches the closed inventory it carries exactly.

    Any predicate that carries a closed inventory of its one subject is accepted: closed-tree
    (`attest attest`), runtime and installation (`attest build --key`). The attestation is
    verified exactly as `attest verify-attestation FILE` does (the same signatures, policy and
    failures), then PATH is compared with its inventory; `verify-attestation` reads no tree and
    prints the statement instead.
    """
    from ..attestation import MAX_ATTESTATION_BYTES, load_policy, load_signer, verify_tree_attestation  # lazy

    digest_option(attestation_digest, what="--attestation-digest")
    if (summary is None) != (not key):
        raise InputError(CommonCode.USAGE, "--summary and --key go together")
    if len(key) > 1:
        # Silently signing with the last of several keys is what this refuses.
        raise InputError(CommonCode.USAGE, "--summary is signed by one --key")
    json_input(attestation, what="attestation", max_bytes=MAX_ATTESTATION_BYTES)
    pol = load_policy(policy)
    signer = load_signer(key[0]) if key else None
    with progress_bar("checking", json_mode) as progress:
        result = verify_tree_attestation(
            path, attestation, pol,
            expected_attestation_digest=attestation_digest,
            summary_out=summary, summary_signer=signer, summary_format=summary_format,
            progress=progress,
        )
    v = result.verified
    if json_mode:
        out = {"ok": True, "identity": result.inventory.identity, "entries": len(result.inventory.entries), **v.to_json()}
        if result.summary is not None:
            out["summary"] = result.summary
        print_json(out)
    else:
        print(f"OK: {path} matches {result.inventory.identity} ({count(len(result.inventory.entries), 'entry')}), signed by {', '.join(v.signers)}")
        if result.summary is not None:
            print(f"wrote verification summary {result.summary}")


__all__ = ["register"]
