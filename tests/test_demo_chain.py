"""The demo's trusted review chain: promote, install, a consumer repository, `attest bootstrap`, a refusal.

Needs the project's runtime built from its own lock, hence the package registry and the build
sandbox: marked ``registry`` and skipped where either is missing (tests/test_demo.py runs the
rest of the demo offline).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.build import registry_reachable, sandbox_available

from attest.attestation import load_policy, load_signer
from attest.builder import install_skill
from attest.cli import main

ROOT = Path(__file__).resolve().parents[1]



@pytest.mark.registry
@pytest.mark.skipif(not registry_reachable(), reason="the package registry is unreachable")
@pytest.mark.skipif(not sandbox_available(), reason="the build sandbox cannot be established here")
def test_the_demo_hands_off_a_pull_request_and_refuses_a_changed_base(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["demo", "--state-dir", str(state)]) == 0  # its lines wrapped at 100 columns: a space in a long line may be a newline
    captured = capfd.readouterr()
    out = captured.out
    # The long steps (the runtime build, the rebuilders, the promotion's rebuild check) are silent on stdout; stderr says
    # they are still running, each line naming the step, and holds nothing else.
    beats = captured.err.splitlines()
    assert all(re.fullmatch(r"attest: demo step \d+: still running \(\d+ s\)", line) for line in beats), beats
    chain = out[out.index("\n12. install the promoted skill"):]
    for name in ("bootstrap", "runtime", "base", "procedure"):
        assert re.search(rf"^   {name} +sha256:[0-9a-f]{{64}} \((immutable|readonly)\)$", chain, re.M), chain
    handoff = re.search(r"^   handoff written:\s+(\S+)\s+\(sha256:[0-9a-f]{64}\)$", chain, re.M)
    assert handoff is not None and Path(handoff.group(1)) == state / "review" / "handoff.json" and Path(handoff.group(1)).is_file()
    # The example reviewer, frozen as the deployment's reviewer image, finds the planted defect through `attest review agent`.
    assert re.search(r"^   review [0-9a-f]{32}: merge base [0-9a-f]{12}, 3 changed path\(s\), 2 of them\s+authority changes; "
                     r"change image\s+sha256:[0-9a-f]{64}$", chain, re.M), chain
    assert re.search(r"^16\. the deployment's reviewer image \(examples/reviewer, attested by the deployment key, frozen\):\s+"
                     r"sha256:[0-9a-f]{64}$", chain, re.M), chain
    assert "   result: complete, 1 finding(s), 1 blocking (confined: network loopback)" in chain
    assert "     critical src/calc.py:6: eval() runs its argument as code" in chain
    assert "   recheck: proceed; serialize: complete, event REQUEST_CHANGES, 1 inline comment(s), 2 in the body" in chain
    assert re.search(r"^     authority: config +modified +\.agent-policy\.yml ", chain, re.M), chain
    assert re.search(r"^     authority: module +modified +policy/review/findings\.md ", chain, re.M), chain
    # The inline comment lands on the planted line, a changed line of `git diff` itself.
    payload = json.loads((state / "review" / "payload-1.json").read_bytes())
    assert payload["event"] == "REQUEST_CHANGES"
    assert [(c["path"], c["line"], c["side"]) for c in payload["comments"]] == [("src/calc.py", 6, "RIGHT")]
    record = json.loads((state / "review" / "record-1.json").read_bytes())
    predicate = json.loads(base64.b64decode(record["payload"]))["predicate"]
    base, head = predicate["merge_base"], predicate["head"]
    hunks = subprocess.run(["git", "-C", str(state / "consumer"), "diff", "-U0", "--no-renames", base, head, "--", "src/calc.py"],
                           capture_output=True, text=True, check=True).stdout
    starts = [tuple(int(x) for x in (m.group(1), m.group(2) or "1")) for m in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", hunks, re.M)]
    assert any(first <= 6 < first + count for first, count in starts), hunks
    assert predicate["status"] == "complete" and predicate["event"] == "REQUEST_CHANGES"
    assert predicate["authority_changes"] == [{"path": ".agent-policy.yml", "status": "modified", "kind": "config"},
                                              {"path": "policy/review/findings.md", "status": "modified", "kind": "module"}]
    assert predicate["findings"]["blocking"] == 3 and predicate["change"]["identity"].startswith("sha256:")
    assert predicate["confinement"]["reviewer"]["identity"].startswith("sha256:")
    assert "   merge gate (CI 'test' success for" in chain and re.search(r"^     MERGE_BLOCKING_FINDINGS: ", chain, re.M), chain
    assert "policy/review/findings.md)" in chain[chain.index("MERGE_BLOCKING_FINDINGS"):], chain  # the whole message, not cut mid-path
    # The fix: refreshed, reviewed clean and complete, CI signed, the gate authorizes.
    assert re.search(r"^   refresh \(REVIEW_HEAD_MOVED\): review [0-9a-f]{32} replaces it, with a change\s+image of its own$", chain, re.M), chain
    assert "   result: complete, 0 finding(s), 0 blocking (confined: network loopback)" in chain
    assert "   recheck: proceed; serialize: complete, event COMMENT, 0 inline comment(s), 0 in the body" in chain
    assert re.search(r"^   merge gate \(CI 'test' success for [0-9a-f]{12}\): AUTHORIZED$", chain, re.M), chain
    assert "   restart (REVIEW_BASE_MOVED): every result of the old root is discarded" in chain
    assert "refused at step 6, as it must be (a stale authority at the base): CHECK_FAILED" in chain
    assert "INPUT_DIGEST_MISMATCH: policy/core/evidence.md" in chain
    assert out.rstrip().endswith("demo complete: every check ended as it must.")
    # The installed Skill was temporary and outside the state; nothing of it is left.
    assert not list((state / "installations").iterdir())

    # `just verify`, as a consumer's CI runs it, on the demo's deployment and pull request (the store is warm).
    backend = re.search(r"^   base +sha256:[0-9a-f]{64} \((\w+)\)$", chain, re.M)
    assert backend is not None
    (tmp_path / "skills").mkdir()
    installed = install_skill(state / "pins.toml", state, tmp_path / "skills" / "agent-policy", load_signer(str(state / "keys" / "deploy.pem")),
                              policy=load_policy(str(state / "trust.toml")))
    bindir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "ATTEST_STATE_DIR": str(state), "ATTEST_PINS": str(state / "pins.toml"),
           "ATTEST_TRUST": str(state / "trust.toml"), "ATTEST_SKILL": installed.installed_root, "ATTEST_INSTALLATION": installed.attestation,
           "ATTEST_KEY": str(state / "keys" / "deploy.pem"), "ATTEST_REVIEW_DIR": str(tmp_path / "verify"), "ATTEST_BACKEND": backend.group(1),
           "ATTEST_REVIEWER_IMAGE": predicate["confinement"]["reviewer"]["identity"],
           "ATTEST_REVIEWER_ATTESTATION": str(state / "review" / "reviewer.intoto.json")}
    just = shutil.which("just", path=env["PATH"])
    assert just is not None
    proc = subprocess.run([just, "-f", str(ROOT / "Justfile"), "verify", str(state / "consumer"), "--identity", str(state / "review" / "identity.json")],
                          env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^BOOTSTRAPPED \S+ pull request \d+ at base [0-9a-f]{40}$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^REVIEWED \S+ pull request \d+ at base [0-9a-f]{40}: complete, 1 finding\(s\), 1 blocking$", proc.stdout, re.M), proc.stdout
    assert json.loads((tmp_path / "verify" / "result.json").read_bytes())["complete"] is True
    assert re.search(r"^PROCEED review [0-9a-f]{32}: REVIEW_UNCHANGED$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^SERIALIZED review [0-9a-f]{32}: COMPLETE for head [0-9a-f]{40} \(recheck: proceed\)$", proc.stdout, re.M), proc.stdout
    payload = json.loads((tmp_path / "verify" / "payload.json").read_bytes())
    assert payload["event"] == "REQUEST_CHANGES" and [(c["path"], c["line"]) for c in payload["comments"]] == [("src/calc.py", 6)]
    assert "Authority changes: found by attest itself" in payload["body"] and "attest-authority-2" in payload["body"]
    assert re.search(r"^    config +modified +\.agent-policy\.yml$", proc.stdout, re.M), proc.stdout

    # The second run reuses the promotion its first run made, verified: no rebuild, no rebuilder, no new log entry.
    assert main(["demo", "--state-dir", str(state)]) == 0
    again = capfd.readouterr().out
    # (a path may put a wrap in the line: compared with each wrap a space again)
    assert f"11. {_head()} is already promoted into {state / 'pins.toml'}: the promotion log verifies" in " ".join(again.split()), again
    # (The last lines name the rebuilders' stores, to say how to remove them; no rebuilder ran.)
    work = again[:again.index("(the store's images are immutable")]
    assert "rebuilder-a" not in work and "rebuilt in another staging context" not in work
    assert f"and the same for {state / 'rebuilder-a'} and {state / 'rebuilder-b'}" in " ".join(again.split())
    assert sorted(p.name for p in (state / "pins.toml.promotions").iterdir()) == ["000001.json"]
    assert again.rstrip().endswith("demo complete: every check ended as it must.")
    # Pins changed outside the promotion are never reused: the log no longer ends at them, and the demo fails closed.
    with open(state / "pins.toml", "a") as f:
        f.write("# edited by hand\n")
    assert main(["demo", "--state-dir", str(state)]) == 1
    assert "PROMOTION_LOG_PINS_MISMATCH" in capfd.readouterr().err


def _head() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
