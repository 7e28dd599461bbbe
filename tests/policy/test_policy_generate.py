"""`attest policy generate`: writes what check reproduces, removes only pristine generated files, same bytes everywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from attest.errors import InputError, VerificationError

SEMANTIC = "docs/review/policy-context.md"
ADAPTER = "docs/review/github-review.json"
SKILL_DIR = ".agents/skills/pr-review"
ADAPTER_LINE = "  - {path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, enabled: true}\n"
GENERATED = (f"{SKILL_DIR}/SKILL.md", f"{SKILL_DIR}/references/procedure.md", f"{SKILL_DIR}/references/result.md", ADAPTER, SEMANTIC)


def test_generate_writes_every_output_and_the_lock_then_check_passes(bare_repo: Any, cli: Any) -> None:
    rc, out = cli("policy", "generate", "--root", str(bare_repo.root), "--json")
    assert rc == 0 and out["ok"] is True
    assert out["written"] == list(GENERATED) and out["removed"] == [] and out["lock"]["written"] is True
    assert [o["path"] for o in out["outputs"]] == list(GENERATED)
    assert bare_repo.check_codes() == []
    names = {p.name for p in bare_repo.root.rglob("*")}
    assert not any(n.endswith(".attest-tmp") for n in names)
    assert (bare_repo.root / SEMANTIC).stat().st_mode & 0o777 == 0o644


def test_a_second_run_changes_nothing(repo: Any, cli: Any) -> None:
    before = {p: (repo.root / p).stat().st_mtime_ns for p in (*GENERATED, ".agent-policy.lock")}
    rc, out = cli("policy", "generate", "--root", str(repo.root))
    assert rc == 0 and "unchanged: .agent-policy.lock; 5 outputs, 5 already current; check passed" in out
    assert before == {p: (repo.root / p).stat().st_mtime_ns for p in before}


def test_a_module_edit_regenerates_its_projections_and_the_lock(repo: Any) -> None:
    repo.write("policy/core/evidence.md", b"# Evidence\n\nA changed rule.\n")
    report = repo.generate()
    assert report.written == (ADAPTER, SEMANTIC) and report.lock_written
    assert b"A changed rule." in repo.read(SEMANTIC)
    assert repo.check_codes() == []


def test_a_pristine_output_that_is_no_longer_configured_is_removed(repo: Any) -> None:
    repo.edit_config(ADAPTER_LINE, "")
    report = repo.generate()
    assert report.removed == (ADAPTER,) and not (repo.root / ADAPTER).exists()
    assert repo.check_codes() == []


def test_a_disabled_pristine_output_is_removed(repo: Any) -> None:
    repo.edit_config("github-review-json-adapter-v1, context: review, enabled: true", "github-review-json-adapter-v1, context: review, enabled: false")
    assert repo.generate().removed == (ADAPTER,)
    assert repo.check_codes() == []


def test_disabling_pr_review_removes_the_skill_and_its_directories(repo: Any) -> None:
    repo.edit_config("[pr-review]", "[]")
    report = repo.generate()
    assert set(report.removed) == {f"{SKILL_DIR}/SKILL.md", f"{SKILL_DIR}/references/procedure.md", f"{SKILL_DIR}/references/result.md"}
    assert not (repo.root / SKILL_DIR).exists() and (repo.root / ".agents/skills").is_dir()
    assert repo.check_codes() == []


def _untouched(repo: Any, before: dict[str, bytes]) -> None:
    assert repo.files() == before, "generate wrote or removed something although it failed"


def test_a_modified_file_that_is_no_longer_generated_is_reported_never_deleted(repo: Any) -> None:
    repo.write(ADAPTER, repo.read(ADAPTER) + b" ")
    repo.edit_config(ADAPTER_LINE, "")
    repo.write("policy/core/evidence.md", b"# Evidence\n\nA changed rule too.\n")  # a write that must not happen either
    before = repo.files()
    with pytest.raises(VerificationError) as e:
        repo.generate()
    assert [(f.code, f.path) for f in e.value.findings] == [("UNOWNED_FILE", ADAPTER)]
    _untouched(repo, before)


def test_a_never_generated_file_at_a_disabled_output_path_is_never_deleted(repo: Any) -> None:
    repo.edit_config(ADAPTER_LINE, ADAPTER_LINE + "  - {path: docs/mine.md, renderer: policy-context-md, context: review, enabled: false}\n")
    repo.write("docs/mine.md", b"my own notes\n")
    before = repo.files()
    assert repo.generate_codes() == ["UNOWNED_FILE"]
    _untouched(repo, before)


def test_a_file_planted_in_the_skill_tree_is_never_deleted(repo: Any) -> None:
    repo.write(f"{SKILL_DIR}/references/notes.md", b"mine\n")
    before = repo.files()
    assert repo.generate_codes() == ["UNOWNED_FILE"]
    _untouched(repo, before)


def test_a_hand_edited_output_is_not_overwritten(repo: Any) -> None:
    repo.write(SEMANTIC, repo.read(SEMANTIC) + b"\nmy edit\n")
    before = repo.files()
    assert repo.generate_codes() == ["UNOWNED_FILE"]
    _untouched(repo, before)
    (repo.root / SEMANTIC).unlink()  # moved away: generate writes it again
    assert repo.generate().written == (SEMANTIC,)


def test_a_first_generation_keeps_an_identical_file_and_refuses_a_different_one(bare_repo: Any) -> None:
    bare_repo.write(SEMANTIC, b"someone else's file\n")
    assert bare_repo.generate_codes() == ["UNOWNED_FILE"]
    assert bare_repo.read(SEMANTIC) == b"someone else's file\n" and not (bare_repo.root / ".agent-policy.lock").exists()


def test_generate_never_writes_through_a_symlinked_directory(repo: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(repo.root / "docs/review")
    (repo.root / "docs/review").symlink_to(outside)
    assert set(repo.generate_codes()) == {"PATH_SYMLINK"}
    assert list(outside.iterdir()) == []


def test_generate_never_writes_through_a_symlinked_file(repo: Any, tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_bytes(b"precious\n")
    (repo.root / SEMANTIC).unlink()
    (repo.root / SEMANTIC).symlink_to(target)
    assert repo.generate_codes() == ["PATH_SYMLINK"]
    assert target.read_bytes() == b"precious\n"


def test_generate_refuses_an_invalid_lock(repo: Any) -> None:
    repo.write(".agent-policy.lock", repo.read(".agent-policy.lock") + b"\n")
    with pytest.raises(InputError) as e:
        repo.generate()
    assert e.value.code == "NOT_CANONICAL"


def test_generate_with_a_missing_module_writes_nothing(repo: Any) -> None:
    (repo.root / "policy/review/findings.md").unlink()
    before = repo.files()
    assert repo.generate_codes() == ["INPUT_MISSING"]
    _untouched(repo, before)


ENVIRONMENTS = [
    {"umask": 0o022, "LC_ALL": "C", "TZ": "UTC", "PYTHONHASHSEED": "0", "cwd": "/"},
    {"umask": 0o077, "LC_ALL": "C.UTF-8", "TZ": "Pacific/Kiritimati", "PYTHONHASHSEED": "4242", "cwd": "tmp"},
    {"umask": 0o002, "LC_ALL": "tr_TR.UTF-8", "TZ": "America/St_Johns", "PYTHONHASHSEED": "random", "cwd": "repo"},
]


def _generate_in(root: Path, env: dict[str, Any], tmp: Path) -> dict[str, bytes]:
    cwd = {"/": "/", "tmp": str(tmp), "repo": str(root)}[env["cwd"]]
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG"))}
    child_env.update(LC_ALL=env["LC_ALL"], LANG=env["LC_ALL"], TZ=env["TZ"], PYTHONHASHSEED=env["PYTHONHASHSEED"], PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-m", "attest", "policy", "generate", "--root", str(root), "--json"], cwd=cwd, env=child_env,
                         capture_output=True, text=True, timeout=120, preexec_fn=lambda: os.umask(env["umask"]))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ok"] is True
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_generate_gives_identical_bytes_under_any_umask_locale_timezone_hash_seed_and_cwd(bare_repo: Any, tmp_path: Path) -> None:
    results = []
    for i, env in enumerate(ENVIRONMENTS):
        root = tmp_path / f"copy{i}" / "repo"
        shutil.copytree(bare_repo.root, root)
        results.append(_generate_in(root, env, tmp_path))
    assert results[0] == results[1] == results[2]
    assert set(results[0]) >= {*GENERATED, ".agent-policy.lock"}
    # And in-process generation agrees with all of them.
    bare_repo.generate()
    assert bare_repo.files() == results[0]
