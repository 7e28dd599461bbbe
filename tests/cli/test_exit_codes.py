"""Exit codes as documented (README "Using it", docs/json.md): 0 ok, 1 verification failed, 2 bad usage or
unreadable input; `attest exec` 125 for its own failures (usage included), as env(1).

Each case runs the real console entry point in a subprocess on real files in tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ZERO = "sha256:" + "0" * 64


def attest(*args: str, cwd: Path | None = None) -> tuple[int, dict[str, object] | None, str]:
    """Run ``attest ARGS --json``: the exit status, the one JSON object printed (or None), stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_")}
    # --json is attest's word only before "--" (after it, the command's).
    words = [*args[:args.index("--")], "--json", *args[args.index("--"):]] if "--" in args else [*args, "--json"]
    out = subprocess.run([sys.executable, "-m", "attest", *words], capture_output=True, text=True, cwd=cwd, env=env,
                         stdin=subprocess.DEVNULL, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stdout.splitlines()
    return out.returncode, (json.loads(lines[0]) if lines else None), out.stderr


def codes(doc: dict[str, object] | None) -> list[str]:
    assert doc is not None and doc["ok"] is False and doc["schema"] == 1, doc
    errors = doc["errors"]
    assert isinstance(errors, list)
    return [e["code"] for e in errors]


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree, a key, a policy trusting it and a closed-tree attestation of the tree."""
    d = tmp_path_factory.mktemp("signed")
    (d / "tree").mkdir()
    (d / "tree" / "README").write_text("hello\n")
    assert attest("keygen", "-o", str(d / "k.pem"))[0] == 0
    (d / "policy.toml").write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{d / "k.pub.pem"}"\n')
    assert attest("attest", str(d / "tree"), "--key", str(d / "k.pem"), "-o", str(d / "att.json"))[0] == 0
    (d / "not-json.json").write_text("this is not JSON\n")
    state = d / "state"
    state.mkdir(mode=0o700)
    return d


def test_a_verified_tree_exits_0_and_a_tampered_one_1(signed: Path, tmp_path: Path) -> None:
    rc, doc, _ = attest("verify", str(signed / "tree"), "--attestation", str(signed / "att.json"), "--policy", str(signed / "policy.toml"))
    assert rc == 0 and doc is not None and doc["ok"] is True
    tampered = tmp_path / "tree"
    tampered.mkdir()
    (tampered / "README").write_text("pwned\n")
    rc, doc, _ = attest("verify", str(tampered), "--attestation", str(signed / "att.json"), "--policy", str(signed / "policy.toml"))
    assert rc == 1 and "DIGEST_MISMATCH" in codes(doc)


@pytest.mark.parametrize("command", ["verify", "verify-attestation", "freeze"])
def test_a_non_json_attestation_is_unreadable_input(signed: Path, command: str) -> None:
    given = str(signed / "not-json.json")
    args = {
        "verify": ["verify", str(signed / "tree"), "--attestation", given],
        "verify-attestation": ["verify-attestation", given],
        "freeze": ["freeze", str(signed / "tree"), "--attestation", given, "--state-dir", str(signed / "state")],
    }[command]
    rc, doc, _ = attest(*args, "--policy", str(signed / "policy.toml"))
    assert rc == 2 and codes(doc) == ["BAD_JSON"]


@pytest.mark.parametrize("pin", ["nothex", "sha256:00", "sha256:" + "A" * 64, "0" * 64, "sha512:" + "0" * 128])
def test_a_malformed_attestation_digest_is_bad_usage(signed: Path, pin: str) -> None:
    rc, doc, _ = attest("verify", str(signed / "tree"), "--attestation", str(signed / "att.json"), "--policy", str(signed / "policy.toml"),
                        "--attestation-digest", pin)
    assert rc == 2 and codes(doc) == ["USAGE"]


def test_a_well_formed_attestation_digest_that_differs_fails_verification(signed: Path) -> None:
    rc, doc, _ = attest("verify", str(signed / "tree"), "--attestation", str(signed / "att.json"), "--policy", str(signed / "policy.toml"),
                        "--attestation-digest", ZERO)
    assert rc == 1 and codes(doc) == ["ATTESTATION_DIGEST_MISMATCH"]


@pytest.mark.parametrize("command", [["store", "ls"], ["store", "ls", "--check"], ["store", "gc", "--dry-run"]])
def test_a_missing_state_dir_is_bad_usage(tmp_path: Path, command: list[str]) -> None:
    rc, doc, _ = attest(*command, "--state-dir", str(tmp_path / "missing"))
    assert rc == 2 and codes(doc) == ["UNREADABLE"]
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(("args", "code"), [
    (["--keep", "bad"], "BAD_IMAGE_REF"),
    (["--keep", "0" * 64], "BAD_IMAGE_REF"),
])
def test_a_bad_keep_is_bad_usage(signed: Path, args: list[str], code: str) -> None:
    rc, doc, _ = attest("store", "gc", "--state-dir", str(signed / "state"), "--dry-run", *args)
    assert rc == 2 and codes(doc) == [code]


@pytest.mark.parametrize("args", [["store", "gc", "--recent", "-1"], ["store", "gc", "--recent", "soon"], ["inventory", "a", "b"],
                                  ["inventory"], ["rebuild", "--rev", "x"], ["no-such-command"]])
def test_a_bad_flag_value_is_bad_usage(signed: Path, args: list[str]) -> None:
    extra = ["--state-dir", str(signed / "state")] if args[0] == "store" else []
    rc, doc, err = attest(*args, *extra)
    # typer's own usage error: the usage text on stderr for a person, the error document on stdout for a machine.
    assert rc == 2 and codes(doc) == ["USAGE"] and "Usage:" in err


def test_exec_its_own_failures_are_125(signed: Path, tmp_path: Path) -> None:
    state = str(signed / "state")
    # A bare-hex identity is a bad image reference, refused before any image is looked up.
    rc, doc, _ = attest("exec", "--state-dir", state, "--image", "T=" + "0" * 64, "--", "true")
    assert rc == 125 and codes(doc) == ["BAD_IMAGE_REF"]
    rc, doc, _ = attest("exec", "--state-dir", state, "--image", "T", "--", "true")
    assert rc == 125 and codes(doc) == ["BAD_IMAGE_REF"]
    rc, doc, _ = attest("exec", "--state-dir", str(tmp_path / "missing"), "--image", f"T={ZERO}", "--", "true")
    assert rc == 125 and codes(doc) == ["UNREADABLE"]
    # Bad usage typer itself refuses: 125 too, never a status the command could have returned.
    rc, doc, err = attest("exec", "--state-dir", state, "--", "true")
    assert rc == 125 and codes(doc) == ["USAGE"] and "--image" in err
