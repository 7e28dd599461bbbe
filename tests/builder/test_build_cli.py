"""The thin CLI: fetch, build runtime|skill, rebuild, promote; exit codes and --json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.build import Project, make_toolchain_repo

from attest.attestation import generate_key
from attest.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    rc = main([*args, "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    return rc, json.loads(out[-1]) if out else {}


def test_cli_end_to_end(project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    rc, doc = run(capsys, "fetch", "--lock", str(project.lock), "--cache", str(project.cache))
    assert rc == 0 and doc["ok"] and len(doc["fetched"]) == 2
    rc, doc = run(capsys, "fetch", "--lock", str(project.lock), "--cache", str(project.cache))
    assert rc == 0 and doc["fetched"] == [] and doc["network_used"] is False
    key = tmp_path / "release.pem"
    generate_key("ed25519", key)
    rc, doc = run(capsys, "build", "runtime", str(project.recipe), "--toolchain-rev", project.sha,
                  "--state-dir", state, "--cache", str(project.cache), "--key", str(key))
    assert rc == 0 and doc["ok"] and doc["network_isolated"] is True and len(doc["attestations"]) == 2
    rc, doc = run(capsys, "build", "skill", str(project.skill_recipe), "--skill-rev", project.sha, "--state-dir", state)
    assert rc == 0 and doc["kind"] == "skill"
    rc, doc = run(capsys, "rebuild", str(project.recipe), "--rev", project.sha, "--state-dir", state,
                  "--cache", str(project.cache), "--key", str(key), "--vsa", str(tmp_path / "vsa.json"))
    assert rc == 0 and doc["ok"] and Path(doc["vsa"]).exists()
    policy = tmp_path / "policy.toml"
    policy.write_text('threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "release.pub.pem"\n')
    pins = tmp_path / "pins.toml"
    rc, doc = run(capsys, "promote", "--unsafe-without-rebuilders", "--toolchain-rev", project.sha, "--pins", str(pins), "--key", str(key), "--policy", str(policy),
                  "--runtime-recipe", str(project.recipe), "--skill-recipe", str(project.skill_recipe), "--state-dir", state,
                  "--cache", str(project.cache))
    # This project's runtime carries no attest, so the candidate cannot bootstrap the fixture consumer: the CLI's
    # promotion (which always proves the chain) refuses it and writes nothing. tests/builder/test_promote.py and
    # tests/review/test_release_promotion.py promote real candidates.
    assert rc == 1 and [e["code"] for e in doc["errors"]] == ["PROMOTION_FIXTURE_FAILED", "COMMAND_NOT_FOUND"], doc
    assert not pins.exists()


def test_cli_failures_exit_nonzero_with_codes(project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    rc, doc = run(capsys, "build", "runtime", str(project.recipe), "--toolchain-rev", "HEAD", "--state-dir", state)
    assert rc == 2 and doc["errors"][0]["code"] == "NOT_FULL_SHA"
    rc, doc = run(capsys, "build", "runtime", str(project.skill_recipe), "--toolchain-rev", project.sha, "--state-dir", state)
    assert rc == 2 and doc["errors"][0]["code"] == "BAD_RECIPE"
    rc, doc = run(capsys, "build", "runtime", str(project.recipe), "--toolchain-rev", project.sha, "--state-dir", state,
                  "--cache", str(tmp_path / "empty"))
    assert rc == 2 and doc["errors"][0]["code"] == "NOT_IN_CACHE"
    rc, doc = run(capsys, "fetch", "--lock", str(tmp_path / "missing.toml"), "--cache", str(project.cache))
    assert rc == 2 and doc["errors"][0]["code"] == "UNREADABLE"
    # A usage mistake has the one usage code, not a recipe's.
    rc, doc = run(capsys, "rebuild", str(project.recipe), "--rev", project.sha, "--state-dir", state, "--vsa", str(tmp_path / "v.json"))
    assert rc == 2 and doc["errors"][0]["code"] == "USAGE" and not (tmp_path / "v.json").exists()
    # An unreproducible toolchain: exit 1, every differing entry listed.
    sha = make_toolchain_repo(project.repo, noisy=True)
    run(capsys, "fetch", "--lock", str(project.lock), "--cache", str(project.cache))
    rc, doc = run(capsys, "rebuild", str(project.recipe), "--rev", sha, "--state-dir", state, "--cache", str(project.cache))
    assert rc == 1 and doc["ok"] is False
    assert {"NOT_REPRODUCIBLE", "DIGEST_MISMATCH"} <= {e["code"] for e in doc["errors"]}
    rc = main(["rebuild", str(project.recipe), "--rev", sha, "--state-dir", state, "--cache", str(project.cache)])
    err = capsys.readouterr().err
    assert rc == 1 and "_noise.txt" in err and "--- first/" in err


def test_fetch_creates_a_private_state_by_default(project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "fresh" / "state"
    rc, doc = run(capsys, "fetch", "--lock", str(project.lock), "--state-dir", str(state))
    assert rc == 0 and len(doc["fetched"]) == 2
    assert (state / "cache").is_dir() and (state.stat().st_mode & 0o777) == 0o700
    rc, doc = run(capsys, "build", "skill", str(project.skill_recipe), "--skill-rev", project.sha, "--state-dir", str(state))
    assert rc == 0 and doc["ok"]


def test_cli_reports_the_established_sandbox(project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    assert main(["fetch", "--lock", str(project.lock), "--cache", str(project.cache)]) == 0
    capsys.readouterr()
    rc = main(["build", "runtime", str(project.recipe), "--toolchain-rev", project.sha, "--state-dir", state,
               "--cache", str(project.cache)])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith("built runtime ")
    if os.geteuid() == 0:
        assert "namespaces net, mount, pid, ipc, uts; uid/gid one per build, unused by any account or process" in out
    else:  # the rootless sandbox: a user namespace mapping only the caller
        assert "namespaces user, " in out
    assert "/dev: tmpfs with null, zero, full, random, urandom" in out
    rc, doc = run(capsys, "build", "runtime", str(project.recipe), "--toolchain-rev", project.sha, "--state-dir", state,
                  "--cache", str(project.cache))
    assert rc == 0 and doc["reused"] and doc["sandbox"]["filesystem_confined"] is True
    assert os.geteuid() != 0 or "unused" in doc["sandbox"]["uid"]
    # Reused in text: it never reads as if a sandbox ran now.
    rc = main(["build", "runtime", str(project.recipe), "--toolchain-rev", project.sha, "--state-dir", state, "--cache", str(project.cache)])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith("reused runtime ") and "no build step ran" in out.splitlines()[0]
    assert "  as recorded by the build that made it:" in out and not out.startswith("built")
