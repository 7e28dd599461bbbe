"""THREATS groups E and H: the trust policy file, its strict parsing, and where it may come from."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.keys import VECTORS, Keys

from attest.attestation import KeySignerSpec, SigstoreSignerSpec, load_policy
from attest.errors import InputError


def write(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def code(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        load_policy(path)
    return caught.value.code


def key_signer(keys: Keys, name: str = "ed") -> str:
    return f'[[signers]]\nkind = "key"\npublic_key = "{keys.pub(name)}"\n'


def test_a_valid_mixed_policy(tmp_path: Path, keys: Keys) -> None:
    root = tmp_path / "roots"
    root.mkdir()
    shutil.copy(VECTORS / "staging_trusted_root.json", root / "trusted_root.json")
    keydir = tmp_path / "keys"
    keydir.mkdir()
    shutil.copy(keys.pub("ed"), keydir / "release.pub.pem")
    policy = load_policy(write(tmp_path, """threshold = 2
[[signers]]
kind = "key"
public_key = "keys/release.pub.pem"   # relative to the policy file
[[signers]]
kind = "sigstore"
identity = "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main"
issuer = "https://token.actions.githubusercontent.com"
trusted_root = "roots/trusted_root.json"
"""))
    assert policy.threshold == 2
    k, s = policy.signers
    assert isinstance(k, KeySignerSpec) and k.id == "key:sha256:" + keys.signers["ed"].key_id
    assert isinstance(s, SigstoreSignerSpec) and s.identity.endswith("@refs/heads/main")
    assert s.trusted_root == (VECTORS / "staging_trusted_root.json").read_bytes()
    assert policy.digest.startswith("sha256:") and len(policy.sources) == 3


def test_relative_paths_resolve_against_the_policy_file_not_the_cwd(tmp_path: Path, keys: Keys, monkeypatch) -> None:
    (tmp_path / "p").mkdir()
    shutil.copy(keys.pub("ed"), tmp_path / "p" / "k.pub.pem")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    shutil.copy(keys.pub("evil"), elsewhere / "k.pub.pem")  # a planted key in the current directory
    monkeypatch.chdir(elsewhere)
    policy = load_policy(write(tmp_path / "p", 'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "k.pub.pem"\n'))
    assert policy.signers[0].id == "key:sha256:" + keys.signers["ed"].key_id


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("threshold = 1\n", "POLICY_EMPTY"),
        ("", "POLICY_EMPTY"),
        ("threshold = 1\nsigners = []\n", "POLICY_EMPTY"),
        ("threshold = 1\nthreshold = 1\n{KEY}", "DUPLICATE_KEY"),
        ("threshold = 1\n[extra]\na = 1\n[extra]\nb = 2\n{KEY}", "DUPLICATE_KEY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\nkind = "key"\npublic_key = "x"\n', "DUPLICATE_KEY"),
        ("threshold = 1\ntrust_everyone = true\n{KEY}", "POLICY_UNKNOWN_KEY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{PUB}"\nidentity_regex = ".*"\n', "POLICY_UNKNOWN_KEY"),
        ("threshold = 2\n{KEY}", "POLICY_THRESHOLD"),
        ("threshold = 0\n{KEY}", "POLICY_THRESHOLD"),
        ("threshold = true\n{KEY}", "POLICY_THRESHOLD"),
        ('threshold = "1"\n{KEY}', "POLICY_THRESHOLD"),
        ("{KEY}", "POLICY_THRESHOLD"),
        ("threshold = 2\n{KEY}{KEY}", "POLICY_DUPLICATE_SIGNER"),
        ('threshold = 1\n[[signers]]\nkind = "pgp"\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = ""\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "x"\nissuer = "y"\ntrusted_root = "{PUB}"\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = ""\nissuer = "y"\ntrusted_root = "{ROOT}"\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = " x"\nissuer = "y"\ntrusted_root = "{ROOT}"\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "x"\ntrusted_root = "{ROOT}"\n', "BAD_POLICY"),
        ("threshold = 1\nsigners = 3\n", "BAD_POLICY"),
        ("threshold = \n", "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{ROOT}"\n', "BAD_KEY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "missing.pem"\n', "UNREADABLE"),
        # a typo in a predicate type of attest's or SLSA's namespace: refused now, not as SIGNER_NOT_FOR_PREDICATE later
        ('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{PUB}"\npredicates = ["https://attest.dev/runtmie/v1"]\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{PUB}"\npredicates = ["https://attest.dev/runtime/v2"]\n', "BAD_POLICY"),
        ('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{PUB}"\npredicates = ["https://slsa.dev/provenance/v0.2"]\n', "BAD_POLICY"),
    ],
)
def test_invalid_policies(tmp_path: Path, keys: Keys, text: str, expected: str) -> None:
    text = (text.replace("{KEY}", key_signer(keys)).replace("{PUB}", str(keys.pub("ed")))
            .replace("{ROOT}", str(VECTORS / "staging_trusted_root.json")))
    assert code(write(tmp_path, text)) == expected


def test_the_same_key_under_two_paths_is_one_signer(tmp_path: Path, keys: Keys) -> None:
    copy = tmp_path / "copy.pub.pem"
    copy.write_bytes(keys.pub("ed").read_bytes().replace(b"\n", b"\r\n"))  # another spelling, same key
    text = f"threshold = 2\n{key_signer(keys)}[[signers]]\nkind = \"key\"\npublic_key = \"{copy}\"\n"
    assert code(write(tmp_path, text)) == "POLICY_DUPLICATE_SIGNER"


def test_a_policy_that_is_not_utf8_or_not_a_file(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_bytes(b"threshold = 1\n# \xff\n")
    assert code(p) == "BAD_POLICY"
    assert code(tmp_path) == "UNREADABLE"  # a directory
    os.mkfifo(tmp_path / "fifo")
    assert code(tmp_path / "fifo") == "UNREADABLE"  # never blocks on a FIFO


def test_policy_file_size_is_capped(tmp_path: Path) -> None:
    p = tmp_path / "big.toml"
    p.write_bytes(b"#" * (1024 * 1024 + 1))
    assert code(p) == "TOO_LARGE"


# -- signer roles: `predicates` (a release key is not a deployment key) ------------------------------------------

RUNTIME = "https://attest.dev/runtime/v1"
HANDOFF = "https://attest.dev/review-handoff/v1"


@pytest.mark.parametrize(("roles", "threshold", "signed_by", "predicate", "ok"), [
    ({"ed": (RUNTIME,)}, 1, ("ed",), RUNTIME, True),                       # its role
    ({"ed": (RUNTIME,)}, 1, ("ed",), HANDOFF, False),                      # not its role
    ({"ed": ()}, 1, ("ed",), HANDOFF, True),                               # no predicates: any statement
    ({"ed": (RUNTIME,), "ec": (HANDOFF,)}, 1, ("ed",), HANDOFF, False),   # the other signer's role
    ({"ed": (RUNTIME,), "ec": (HANDOFF,)}, 1, ("ed", "ec"), HANDOFF, True),
    ({"ed": (RUNTIME, HANDOFF), "ec": (HANDOFF,)}, 2, ("ed", "ec"), HANDOFF, True),
    ({"ed": (RUNTIME,), "ec": (HANDOFF,)}, 2, ("ed", "ec"), HANDOFF, False),  # only one may sign it: below threshold
])
def test_signer_roles(tmp_path: Path, keys: Keys, roles: dict[str, tuple[str, ...]], threshold: int, signed_by: tuple[str, ...],
                      predicate: str, ok: bool) -> None:
    import json as _json

    from attest.attestation import Envelope, sign_statement, statement, subject, verify_attestation_bytes
    from attest.errors import VerificationError

    text = f"threshold = {threshold}\n" + "".join(
        key_signer(keys, n) + (f"predicates = {_json.dumps(list(r))}\n" if r else "") for n, r in roles.items())
    policy = load_policy(write(tmp_path, text))
    st = statement([subject("x", "0" * 64)], predicate, {"k": 1})
    envelopes = [Envelope.from_json(_json.loads(sign_statement(st, keys.signers[n]))) for n in signed_by]
    merged = {**envelopes[0].to_json(), "signatures": [s for e in envelopes for s in e.to_json()["signatures"]]}
    data = _json.dumps(merged).encode()
    if ok:
        assert len(verify_attestation_bytes(data, policy).signers) >= threshold
    else:
        with pytest.raises(VerificationError) as caught:
            verify_attestation_bytes(data, policy)
        assert caught.value.code == "SIGNER_NOT_FOR_PREDICATE"


def test_every_predicate_type_of_the_package_is_a_known_one() -> None:
    """The policy's list of known types is whole: every ``*_PREDICATE`` constant of every layer is in it."""
    import importlib
    import pkgutil

    import attest
    from attest.attestation._policy import KNOWN_PREDICATES

    found: set[str] = set()
    for mod in pkgutil.walk_packages(attest.__path__, "attest."):
        if mod.name.endswith("__main__"):
            continue  # running it is running attest
        module = importlib.import_module(mod.name)
        found |= {v for k, v in vars(module).items() if k.endswith("_PREDICATE") and isinstance(v, str) and "://" in v}
    assert found and found <= set(KNOWN_PREDICATES), sorted(found - set(KNOWN_PREDICATES))


def test_a_type_outside_the_known_namespaces_is_still_a_signers_to_name(tmp_path: Path, keys: Keys) -> None:
    text = f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{keys.pub("ed")}"\npredicates = ["https://example.com/own/v1"]\n'
    assert load_policy(str(write(tmp_path, text))).signers[0].predicates == ("https://example.com/own/v1",)
