"""Step 6's real runner: the runtime image's own ``bin/attest policy check --json``, run with ``attest exec``.

Needs the project's runtime built from its own lock (lockfiles/pylock.toml), which needs the
package registry: marked ``registry`` and skipped offline. The offline chain tests use a fake of
the same :class:`PolicyCheckRunner` interface (tests/review/test_bootstrap.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.build import registry_reachable
from support.caps import BACKEND
from support.gitrepo import git
from support.project_runtime import ProjectRuntime

from attest.freeze import Store
from attest.policy import generate_policy
from attest.review.bootstrap import ImageCheckRunner, RuntimeImage, decide_check, read_authority, snapshot_base


@pytest.mark.registry
@pytest.mark.skipif(not registry_reachable(), reason="the package registry is unreachable")
def test_the_managed_check_runs_from_the_runtime_image(shared_project_runtime: ProjectRuntime, tmp_path: Path) -> None:
    from attest.git import GitRepo

    built = shared_project_runtime.build()  # the session's one build of HEAD, verified and reused
    sha, state = shared_project_runtime.sha, shared_project_runtime.state
    consumer = tmp_path / "consumer"
    consumer.mkdir()
    git(consumer, "init", "-q")
    (consumer / "policy/core").mkdir(parents=True)
    (consumer / "policy/core/evidence.md").write_bytes(b"# Evidence\n")
    (consumer / ".agent-policy.yml").write_text(
        f"schema: 2\ntoolchain:\n  repository: https://github.com/attest-dev/attest\n  revision: {sha}\nskills:\n  enabled: [pr-review]\n"
        "contexts:\n  review:\n    modules: [policy/core/evidence.md]\n"
        "outputs:\n  - {path: docs/review/policy-context.md, renderer: policy-context-md, context: review, enabled: true}\n")
    generate_policy(consumer)
    git(consumer, "add", "-A")
    git(consumer, "commit", "-qm", "base")
    with GitRepo.open(consumer) as repo:
        base = snapshot_base(repo, git(consumer, "rev-parse", "HEAD"), str(state), backend=BACKEND)
    authority = read_authority(base)
    image = Store(state).get(built.inventory.identity)
    runtime = RuntimeImage(built.name, image, "", "", ())
    run = ImageCheckRunner(str(state))(runtime, base)
    found, outputs = decide_check(run, authority)
    assert run.exit_code == 0 and found == [], run.stdout[:2000]
    assert {o.path for o in outputs} >= {"docs/review/policy-context.md", ".agents/skills/pr-review/SKILL.md"}
