"""The bootstrap's pure decisions, table-driven (no filesystem beyond what a case needs), and exec's stdout capture."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from attest._safefs import Kind
from attest.attestation._tree import Placement
from attest.errors import Finding, VerificationError
from attest.freeze import Image, freeze_tree, run_from_images
from attest.inventory import inventory_tree
from attest.policy import PathRole, PolicyLock, check_authority_path
from attest.review.bootstrap import (
    BootstrapCode,
    CheckRun,
    ProcedureFile,
    ReproducedOutput,
    check_inputs_outside,
    decide_check,
    decide_image,
    decide_procedure_paths,
    procedure_inventory,
)

SKILL = ".agents/skills/pr-review"


def _out(path: str, data: bytes) -> ReproducedOutput:
    return ReproducedOutput(path, "pr-review-skill-v1", None, hashlib.sha256(data).hexdigest())


def test_step7_every_procedure_path_is_judged() -> None:
    good, other = b"# skill\n", b"# ref\n"
    reproduced = [_out(f"{SKILL}/SKILL.md", good), _out(f"{SKILL}/references/a.md", other)]
    reads: dict[str, bytes | Finding] = {f"{SKILL}/SKILL.md": good, f"{SKILL}/references/a.md": other}
    assert decide_procedure_paths([f"{SKILL}/SKILL.md", f"{SKILL}/references/a.md"], reads, reproduced) == []
    # Outside the pr-review tree, even if some check had reproduced it.
    found = decide_procedure_paths(["docs/review/policy-context.md"], {"docs/review/policy-context.md": good}, reproduced)
    assert [f.code for f in found] == ["PATH_OUTSIDE_SKILL"]
    assert [f.code for f in decide_procedure_paths([f"{SKILL}/../x.md"], {}, reproduced)] == ["PATH_NOT_NORMAL"]
    # A symlink at a directory level, as the descriptor walk reports it.
    link = check_authority_path(f"{SKILL}/references/a.md", PathRole.SKILL, [Kind.DIR, Kind.DIR, Kind.DIR, Kind.SYMLINK])
    assert link is not None
    found = decide_procedure_paths([f"{SKILL}/references/a.md"], {f"{SKILL}/references/a.md": link}, reproduced)
    assert [f.code for f in found] == ["PATH_SYMLINK"]
    # Not reproduced, or reproduced with other bytes.
    found = decide_procedure_paths([f"{SKILL}/references/b.md"], {f"{SKILL}/references/b.md": other}, reproduced)
    assert [f.code for f in found] == [BootstrapCode.PROCEDURE_NOT_REPRODUCED]
    found = decide_procedure_paths([f"{SKILL}/SKILL.md"], {f"{SKILL}/SKILL.md": b"# other\n"}, reproduced)
    assert [f.code for f in found] == [BootstrapCode.PROCEDURE_NOT_REPRODUCED]


def _lock(outputs: list[ReproducedOutput]) -> PolicyLock:
    return PolicyLock.from_json({"config": {"path": ".agent-policy.yml", "sha256": "a" * 64}, "inputs": [],
                                 "outputs": [o.to_json() for o in outputs], "schema": 2,
                                 "toolchain": {"repository": "https://example.org/t.git", "revision": "b" * 40}})


def test_step8_the_bundle_inventory_is_the_reproduced_and_locked_digests() -> None:
    files = [ProcedureFile(f"{SKILL}/SKILL.md", b"# skill\n"), ProcedureFile(f"{SKILL}/references/a.md", b"# ref\n")]
    reproduced = [_out(f.path, f.data) for f in files]
    inv = procedure_inventory(files, reproduced, _lock(reproduced))
    assert [(e.path, e.type.value) for e in inv.entries] == [("SKILL.md", "file"), ("references", "dir"), ("references/a.md", "file")]
    stale = [reproduced[0], ReproducedOutput(reproduced[1].path, "pr-review-skill-v1", None, "c" * 64)]
    with pytest.raises(VerificationError) as ei:
        procedure_inventory(files, reproduced, _lock(stale))
    assert [(f.code, f.path) for f in ei.value.findings] == [(BootstrapCode.BUNDLE_MISMATCH, f"{SKILL}/references/a.md")]


def test_an_image_must_be_the_attested_one() -> None:
    image = Image("/s/store/x/tree", "sha256:" + "1" * 64, "readonly", 0, 0, ())
    assert decide_image(image, image.identity, BootstrapCode.SKILL_IMAGE_MISMATCH, "bootstrap") == []
    for code in (BootstrapCode.SKILL_IMAGE_MISMATCH, BootstrapCode.RUNTIME_IMAGE_MISMATCH):
        assert [f.code for f in decide_image(image, "sha256:" + "2" * 64, code, "x")] == [code]


def test_step6_the_report_is_judged() -> None:
    class A:
        config_sha256 = "a" * 64
        lock_sha256 = "b" * 64
        lock = _lock([_out(f"{SKILL}/SKILL.md", b"x")])

    ok = (b'{"ok": true, "config": {"sha256": "' + b"a" * 64 + b'"}, "lock": {"sha256": "' + b"b" * 64 + b'"}, "outputs": ['
          b'{"path": "' + SKILL.encode() + b'/SKILL.md", "renderer": "pr-review-skill-v1", "context": null, "sha256": "'
          + hashlib.sha256(b"x").hexdigest().encode() + b'"}]}')
    found, outputs = decide_check(CheckRun(0, ok), A())
    assert found == [] and [o.path for o in outputs] == [f"{SKILL}/SKILL.md"]
    assert [f.code for f in decide_check(CheckRun(0, ok.replace(b'"ok": true', b'"ok": true, "ok": true')), A())[0]] == \
        ["CHECK_FAILED", "CHECK_BAD_OUTPUT"]
    assert [f.code for f in decide_check(CheckRun(0, b'{"ok": true}'), A())[0]] == ["CHECK_BAD_OUTPUT"]
    failed = decide_check(CheckRun(1, b'{"ok": false, "errors": [{"code": "OUTPUT_STALE", "path": "p", "detail": "d"}]}'), A())[0]
    assert [(f.code, f.path) for f in failed] == [("CHECK_FAILED", None), ("OUTPUT_STALE", "p")]


def test_inputs_inside_a_root_by_path_or_by_inode() -> None:
    root = Placement("/srv/repo", ((1, 10),), None)
    assert check_inputs_outside({"PINS": Placement("/etc/pins.toml", ((1, 5), (1, 2)), None)}, {"GITDIR": root}) == []
    by_path = check_inputs_outside({"PINS": Placement("/srv/repo/pins.toml", ((1, 5),), None)}, {"GITDIR": root})
    by_inode = check_inputs_outside({"KEY": Placement("/mnt/alias/k.pem", ((1, 7), (1, 10), (1, 2)), None)}, {"GITDIR": root})
    assert [f.code for f in by_path + by_inode] == [BootstrapCode.BOOTSTRAP_INPUT_IN_TREE] * 2


def test_run_from_images_can_capture_stdout(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "hello.txt").write_bytes(b"frozen\n")
    state = tmp_path / "state"
    image = freeze_tree(src, inventory_tree(src), state, backend="readonly")
    fd = os.memfd_create("t")
    try:
        rc = run_from_images(state, {"T": image.identity}, [sys.executable, "-I", "-c",
                             "import os; print(open(os.environ['ATTEST_IMAGE_T'] + '/hello.txt').read(), end='')"], stdout=fd)
        os.lseek(fd, 0, os.SEEK_SET)
        assert rc == 0 and os.read(fd, 100) == b"frozen\n"
    finally:
        os.close(fd)
    with pytest.raises(Exception) as ei:
        run_from_images(state, {"T": image.identity}, ["true"], stdout=-1)
    assert getattr(ei.value, "code", None) == "BAD_EXEC_ENV"


def test_an_input_inside_a_root_names_the_root_once(tmp_path: Path) -> None:
    from attest.review.bootstrap._deploy import verify_inputs_outside

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pins.toml").write_text("x\n")
    with pytest.raises(VerificationError) as ei:
        verify_inputs_outside({"PINS": str(repo / "pins.toml")}, {f"the repository ({repo})": str(repo)})
    detail = ei.value.findings[0].detail
    assert ei.value.findings[0].code == "BOOTSTRAP_INPUT_IN_TREE" and detail.count(str(repo)) == 1, detail
    assert detail.startswith(f"PINS lies inside the repository ({repo}): ")
