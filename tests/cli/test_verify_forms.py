"""`attest verify-attestation FILE` and `attest verify PATH --attestation FILE`: two verbs that differ only as their help says.

verify-attestation checks who signed FILE and prints its statement, reading no tree; verify checks FILE
the same way, then that PATH is exactly the closed inventory FILE carries. Same signatures, same
failures: a tampered envelope is refused with the same codes by both.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.cli.test_exit_codes import attest, codes


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("forms")
    (d / "tree").mkdir()
    (d / "tree" / "README").write_text("hello\n")
    assert attest("keygen", "-o", str(d / "k.pem"))[0] == 0
    (d / "policy.toml").write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{d / "k.pub.pem"}"\n')
    assert attest("attest", str(d / "tree"), "--key", str(d / "k.pem"), "-o", str(d / "att.json"))[0] == 0
    envelope = json.loads((d / "att.json").read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["note"] = "changed after signing"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (d / "tampered.json").write_text(json.dumps(envelope))
    return d


def _both(d: Path, attestation: str) -> tuple[tuple[int, dict[str, object] | None], tuple[int, dict[str, object] | None]]:
    one = attest("verify-attestation", str(d / attestation), "--policy", str(d / "policy.toml"))
    two = attest("verify", str(d / "tree"), "--attestation", str(d / attestation), "--policy", str(d / "policy.toml"))
    return one[:2], two[:2]


def test_both_accept_the_signed_attestation_with_the_same_signers(signed: Path) -> None:
    (rc1, doc1), (rc2, doc2) = _both(signed, "att.json")
    assert rc1 == 0 and rc2 == 0 and doc1 is not None and doc2 is not None
    assert doc1["signers"] == doc2["signers"] and doc1["predicate_type"] == doc2["predicate_type"]
    assert "statement" in doc1 and "identity" in doc2  # the statement vs the tree's inventory: what each adds


def test_both_refuse_a_tampered_attestation_with_the_same_codes(signed: Path) -> None:
    (rc1, doc1), (rc2, doc2) = _both(signed, "tampered.json")
    assert rc1 == rc2 == 1
    assert codes(doc1) == codes(doc2) and codes(doc1)


def test_each_help_says_how_it_differs_from_the_other() -> None:
    import re
    import subprocess
    import sys

    def help_of(*words: str) -> str:  # the text unwrapped (a wrapped "verify-attestation" is broken after its hyphen)
        text = subprocess.run([sys.executable, "-m", "attest", *words, "--help"], capture_output=True, text=True, check=True).stdout
        return " ".join(re.sub(r"-\n\s*", "-", text).split())

    one, two = help_of("verify-attestation"), help_of("verify")
    assert "No tree is read" in one and "`attest verify PATH --attestation FILE`" in one
    assert "verified exactly as `attest verify-attestation FILE` does" in two and "reads no tree" in two
