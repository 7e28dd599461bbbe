"""The pure core of policy loading: ``parse_policy`` decides every document rule, reads no file.

One row per branch of :func:`attest.attestation.parse_policy`; every reason code it can
produce appears at least once. ``load_policy`` (reading the named keys and roots, refusing a
signer listed twice) is covered by test_policy.py.
"""

from __future__ import annotations

import pytest

from attest.attestation import KeySignerRef, ParsedPolicy, SigstoreSignerRef, parse_policy
from attest.errors import InputError

WHERE = "/etc/attest/policy.toml"
KEY = '[[signers]]\nkind = "key"\npublic_key = "keys/release.pub.pem"\n'
SIGSTORE = ('[[signers]]\nkind = "sigstore"\nidentity = "https://github.com/o/r/.github/workflows/release.yml@refs/heads/main"\n'
            'issuer = "https://token.actions.githubusercontent.com"\ntrusted_root = "trusted_root.json"\n')


def key(n: int) -> str:
    return f'[[signers]]\nkind = "key"\npublic_key = "k{n}.pem"\n'


INVALID: list[tuple[str, bytes, str, str]] = [
    # (id, policy bytes, reason code, a word of the detail)
    ("not-utf8", b"threshold = 1\n# \xff\n" + KEY.encode(), "BAD_POLICY", "UTF-8"),
    ("not-toml", b"threshold = \n" + KEY.encode(), "BAD_POLICY", "TOML"),
    ("duplicate-key", b"threshold = 1\nthreshold = 1\n" + KEY.encode(), "DUPLICATE_KEY", "overwrite"),
    ("table-twice", ("threshold = 1\n[x]\na = 1\n[x]\nb = 2\n" + KEY).encode(), "DUPLICATE_KEY", "twice"),
    ("inline-table-mutated", ("threshold = 1\nx = {a = 1}\nx.b = 2\n" + KEY).encode(), "DUPLICATE_KEY", "mutate"),
    ("duplicate-key-in-signer", b'threshold = 1\n[[signers]]\nkind = "key"\nkind = "key"\npublic_key = "k"\n', "DUPLICATE_KEY", "overwrite"),
    ("unknown-top-key", ("threshold = 1\ntrust_everyone = true\n" + KEY).encode(), "POLICY_UNKNOWN_KEY", "trust_everyone"),
    ("signers-not-array", b"threshold = 1\nsigners = 3\n", "BAD_POLICY", "array of tables"),
    ("signers-not-tables", b"threshold = 1\nsigners = [1]\n", "BAD_POLICY", "array of tables"),
    ("no-signers-key", b"threshold = 1\n", "POLICY_EMPTY", "no signer"),
    ("empty-file", b"", "POLICY_EMPTY", "no signer"),
    ("signers-empty", b"threshold = 1\nsigners = []\n", "POLICY_EMPTY", "no signer"),
    ("too-many-signers", ("threshold = 1\n" + "".join(key(i) for i in range(65))).encode(), "BAD_POLICY", "limit is 64"),
    ("threshold-missing", KEY.encode(), "POLICY_THRESHOLD", "required"),
    ("threshold-zero", ("threshold = 0\n" + KEY).encode(), "POLICY_THRESHOLD", "positive"),
    ("threshold-negative", ("threshold = -1\n" + KEY).encode(), "POLICY_THRESHOLD", "positive"),
    ("threshold-bool", ("threshold = true\n" + KEY).encode(), "POLICY_THRESHOLD", "positive"),
    ("threshold-string", ('threshold = "1"\n' + KEY).encode(), "POLICY_THRESHOLD", "positive"),
    ("threshold-float", ("threshold = 1.0\n" + KEY).encode(), "POLICY_THRESHOLD", "positive"),
    ("threshold-above-signers", ("threshold = 2\n" + KEY).encode(), "POLICY_THRESHOLD", "exceeds"),
    ("kind-missing", b'threshold = 1\n[[signers]]\npublic_key = "k"\n', "BAD_POLICY", "kind"),
    ("kind-unknown", b'threshold = 1\n[[signers]]\nkind = "pgp"\n', "BAD_POLICY", "kind"),
    ("key-unknown-field", b'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "k"\nidentity_regex = ".*"\n',
     "POLICY_UNKNOWN_KEY", "identity_regex"),
    ("sigstore-unknown-field", (SIGSTORE + 'public_key = "k"\n').replace("[[signers]]", "threshold = 1\n[[signers]]").encode(),
     "POLICY_UNKNOWN_KEY", "public_key"),
    ("key-missing-field", b'threshold = 1\n[[signers]]\nkind = "key"\n', "BAD_POLICY", "missing"),
    ("sigstore-missing-field", b'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "x"\ntrusted_root = "r"\n',
     "BAD_POLICY", "missing"),
    ("key-path-empty", b'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = ""\n', "BAD_POLICY", "non-empty string"),
    ("key-path-not-string", b'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = 7\n', "BAD_POLICY", "non-empty string"),
    ("key-trusted-root-empty", ("threshold = 1\n" + KEY + 'trusted_root = ""\n').encode(), "BAD_POLICY", "non-empty string"),
    ("key-unknown-field", ("threshold = 1\n" + KEY + 'identity = "x"\n').encode(), "POLICY_UNKNOWN_KEY", "unknown keys"),
    ("identity-blank", b'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "  "\nissuer = "y"\ntrusted_root = "r"\n',
     "BAD_POLICY", "signers[0].identity"),
    ("identity-surrounding-space", b'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = " x"\nissuer = "y"\ntrusted_root = "r"\n',
     "BAD_POLICY", "surrounding spaces"),
    ("issuer-not-string", b'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "x"\nissuer = 1\ntrusted_root = "r"\n',
     "BAD_POLICY", "signers[0].issuer"),
    ("root-trailing-space", b'threshold = 1\n[[signers]]\nkind = "sigstore"\nidentity = "x"\nissuer = "y"\ntrusted_root = "r "\n',
     "BAD_POLICY", "signers[0].trusted_root"),
    ("second-signer-bad", ("threshold = 1\n" + KEY + '[[signers]]\nkind = "x"\n').encode(), "BAD_POLICY", "signers[1].kind"),
    ("predicates-empty", ("threshold = 1\n" + KEY + "predicates = []\n").encode(), "BAD_POLICY", "predicates"),
    ("predicates-not-list", ("threshold = 1\n" + KEY + 'predicates = "https://a/b"\n').encode(), "BAD_POLICY", "predicates"),
    ("predicates-not-uri", ("threshold = 1\n" + KEY + 'predicates = ["runtime"]\n').encode(), "BAD_POLICY", "predicates"),
    ("predicates-twice", ("threshold = 1\n" + KEY + 'predicates = ["https://a/b", "https://a/b"]\n').encode(), "BAD_POLICY",
     "distinct"),
    ("predicates-not-strings", ("threshold = 1\n" + KEY + "predicates = [1]\n").encode(), "BAD_POLICY", "predicates"),
]


@pytest.mark.parametrize(("data", "code", "word"), [row[1:] for row in INVALID], ids=[row[0] for row in INVALID])
def test_invalid_documents(data: bytes, code: str, word: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(data, WHERE)
    assert caught.value.code == code
    assert word in caught.value.detail
    assert caught.value.path == WHERE and caught.value.exit_code == 2


VALID: list[tuple[str, bytes, ParsedPolicy]] = [
    ("one-key", ("threshold = 1\n" + KEY).encode(), ParsedPolicy(1, (KeySignerRef("keys/release.pub.pem"),))),
    ("one-sigstore", ("threshold = 1\n" + SIGSTORE).encode(),
     ParsedPolicy(1, (SigstoreSignerRef("https://github.com/o/r/.github/workflows/release.yml@refs/heads/main",
                                        "https://token.actions.githubusercontent.com", "trusted_root.json"),))),
    ("mixed-threshold-equals-signers", ("threshold = 2\n" + KEY + SIGSTORE).encode(),
     ParsedPolicy(2, (KeySignerRef("keys/release.pub.pem"),
                      SigstoreSignerRef("https://github.com/o/r/.github/workflows/release.yml@refs/heads/main",
                                        "https://token.actions.githubusercontent.com", "trusted_root.json")))),
    ("absolute-path-as-written", b'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "/etc/k.pem"\n',
     ParsedPolicy(1, (KeySignerRef("/etc/k.pem"),))),
    ("inline-array-of-tables", b'threshold = 1\nsigners = [{kind = "key", public_key = "k.pem"}]\n',
     ParsedPolicy(1, (KeySignerRef("k.pem"),))),
    ("sixty-four-signers", ("threshold = 64\n" + "".join(key(i) for i in range(64))).encode(),
     ParsedPolicy(64, tuple(KeySignerRef(f"k{i}.pem") for i in range(64)))),
    ("key-with-roles", ("threshold = 1\n" + KEY + 'predicates = ["https://attest.dev/runtime/v1"]\n').encode(),
     ParsedPolicy(1, (KeySignerRef("keys/release.pub.pem", ("https://attest.dev/runtime/v1",)),))),
    ("sigstore-with-roles", ("threshold = 1\n" + SIGSTORE + 'predicates = ["https://slsa.dev/provenance/v1", "https://a/b"]\n').encode(),
     ParsedPolicy(1, (SigstoreSignerRef("https://github.com/o/r/.github/workflows/release.yml@refs/heads/main",
                                        "https://token.actions.githubusercontent.com", "trusted_root.json",
                                        ("https://slsa.dev/provenance/v1", "https://a/b")),))),
    ("key-with-trusted-root", ("threshold = 1\n" + KEY + 'trusted_root = "root.json"\n').encode(),
     ParsedPolicy(1, (KeySignerRef("keys/release.pub.pem", (), "root.json"),))),
    # The same key twice is one signer, but only load_policy can tell (after reading the keys).
    ("same-path-twice-is-decided-later", ("threshold = 2\n" + KEY + KEY).encode(),
     ParsedPolicy(2, (KeySignerRef("keys/release.pub.pem"), KeySignerRef("keys/release.pub.pem")))),
]


@pytest.mark.parametrize(("data", "expected"), [row[1:] for row in VALID], ids=[row[0] for row in VALID])
def test_valid_documents(data: bytes, expected: ParsedPolicy) -> None:
    assert parse_policy(data, WHERE) == expected


def test_it_reads_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure: the keys and roots it names are neither opened nor required to exist."""
    import builtins
    import os

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("parse_policy touched the filesystem")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(os, "open", refuse)
    monkeypatch.setattr(os, "stat", refuse)
    parsed = parse_policy(("threshold = 2\n" + KEY + SIGSTORE).encode(), "no/such/policy.toml")
    assert [type(s) for s in parsed.signers] == [KeySignerRef, SigstoreSignerRef]
