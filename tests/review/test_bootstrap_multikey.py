"""`attest bootstrap --key A --key B`: every key signs the one handoff envelope (never only the last key)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
from support import deployment
from test_bootstrap import make_consumer

from attest.attestation import generate_key, load_policy, verify_attestation_file
from attest.errors import AttestError
from attest.review.bootstrap import BootstrapError


def test_two_keys_sign_one_handoff_and_meet_a_threshold_of_two(dep: Any, skill: Any, tmp_path: Path) -> None:
    second = tmp_path / "keys" / "deploy2.pem"
    second.parent.mkdir()
    generate_key("ecdsa-p256", second)
    c = make_consumer(tmp_path / "consumer", dep.sha)
    done = test_bootstrap.run(dep, skill, c, tmp_path, key=[str(dep.key), str(second)])
    envelope = json.loads(Path(done.handoff).read_bytes())
    assert len(envelope["signatures"]) == 2
    roles = deployment.DEPLOY_ROLES
    policy = deployment.trust_policy(tmp_path / "two.toml", (dep.key.with_name("deploy.pub.pem"), roles),
                                    (second.with_name("deploy2.pub.pem"), roles))
    policy.write_text(policy.read_text().replace("threshold = 1", "threshold = 2"))
    assert len(verify_attestation_file(done.handoff, load_policy(policy)).signers) == 2


def test_the_same_key_twice_is_refused_before_any_work(dep: Any, skill: Any, tmp_path: Path) -> None:
    c = make_consumer(tmp_path / "consumer", dep.sha)
    with pytest.raises(BootstrapError) as ei:
        test_bootstrap.run(dep, skill, c, tmp_path, key=[str(dep.key), str(dep.key)])
    err: AttestError = ei.value
    assert err.step == 1 and [f.code for f in err.findings] == ["USAGE"]
    assert not (tmp_path / "handoff.json").exists()
