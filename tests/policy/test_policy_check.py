"""`attest policy check`: every way a tree can differ from what its authority generates fails it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from attest.errors import InputError, VerificationError
from attest.policy import check_policy

SEMANTIC = "docs/review/policy-context.md"
ADAPTER = "docs/review/github-review.json"
SKILL = ".agents/skills/pr-review/SKILL.md"
PROCEDURE = ".agents/skills/pr-review/references/procedure.md"


def test_a_generated_repository_passes_and_reports_what_it_reproduced(repo: Any) -> None:
    report = check_policy(repo.root)
    files = repo.files()
    assert [(o.path, o.renderer, o.context) for o in report.outputs] == [
        (SKILL, "pr-review-skill-v1", None), (PROCEDURE, "pr-review-skill-v1", None),
        (".agents/skills/pr-review/references/result.md", "pr-review-skill-v1", None),
        (ADAPTER, "github-review-json-adapter-v1", "review"), (SEMANTIC, "policy-context-md", "review")]
    for o in report.outputs:
        assert o.data == files[o.path]
    assert report.lock.to_bytes() == files[".agent-policy.lock"]


def test_json_lists_the_reproduced_outputs(repo: Any, cli: Any) -> None:
    rc, out = cli("policy", "check", "--root", str(repo.root), "--json")
    assert rc == 0 and out["ok"] is True
    import hashlib

    assert out["outputs"] == [{"path": p, "renderer": r, "context": c, "sha256": hashlib.sha256(repo.read(p)).hexdigest()}
                              for p, r, c in [(SKILL, "pr-review-skill-v1", None), (PROCEDURE, "pr-review-skill-v1", None),
                                              (".agents/skills/pr-review/references/result.md", "pr-review-skill-v1", None),
                                              (ADAPTER, "github-review-json-adapter-v1", "review"),
                                              (SEMANTIC, "policy-context-md", "review")]]
    assert out["lock"]["sha256"] == hashlib.sha256(repo.read(".agent-policy.lock")).hexdigest()
    assert out["config"]["sha256"] == hashlib.sha256(repo.read(".agent-policy.yml")).hexdigest()
    assert [i["path"] for i in out["inputs"]] == ["policy/core/evidence.md", "policy/review/findings.md", "policy/security/secrets.md"]


def test_text_mode_and_the_default_root_is_the_current_directory(repo: Any, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.root)
    rc, out = cli("policy", "check")
    assert rc == 0 and out.startswith(f"OK: {repo.root}: 3 inputs and 5 outputs reproduce byte for byte")


def _edit_lock(repo: Any, fn: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(repo.read(".agent-policy.lock"))
    fn(doc)
    repo.write(".agent-policy.lock", rfc8785.dumps(doc))


def _symlinked_dir(repo: Any, rel: str) -> None:
    real = repo.root / rel
    copy = real.with_name(real.name + "-real")
    real.rename(copy)
    real.symlink_to(copy.name)


def _replace(repo: Any, rel: str, fn: Callable[[Path], None]) -> None:
    (repo.root / rel).unlink()
    fn(repo.root / rel)


FAILS = [
    # (id, how the tree is changed, the codes check fails with, exactly)
    ("a stale output: a module changed, nothing regenerated",
     lambda r: r.write("policy/core/evidence.md", r.read("policy/core/evidence.md") + b"\nA new rule.\n"),
     ["INPUT_DIGEST_MISMATCH", "OUTPUT_STALE", "OUTPUT_STALE"]),
    ("a modified output", lambda r: r.write(SEMANTIC, r.read(SEMANTIC) + b"\nOne more rule, by hand.\n"), ["OUTPUT_MODIFIED"]),
    ("a modified adapter", lambda r: r.write(ADAPTER, r.read(ADAPTER).replace(b"REQUEST_CHANGES", b"APPROVE")), ["OUTPUT_MODIFIED"]),
    ("a modified Skill", lambda r: r.write(PROCEDURE, r.read(PROCEDURE).replace(b"recheck", b"skip")), ["OUTPUT_MODIFIED"]),
    ("an unlisted generated file", lambda r: r.write(".agents/skills/pr-review/references/extra.md", b"# more procedure\n"),
     ["OUTPUT_UNLISTED"]),
    ("an unlisted directory in the Skill tree", lambda r: (r.root / ".agents/skills/pr-review/old").mkdir(), ["OUTPUT_UNLISTED"]),
    ("a missing output", lambda r: (r.root / SEMANTIC).unlink(), ["OUTPUT_MISSING"]),
    ("a missing Skill file", lambda r: (r.root / PROCEDURE).unlink(), ["OUTPUT_MISSING"]),
    ("a missing module", lambda r: (r.root / "policy/security/secrets.md").unlink(), ["INPUT_MISSING"]),
    ("a module that is not UTF-8", lambda r: r.write("policy/security/secrets.md", b"# Secrets\n\xff\n"),
     ["MODULE_NOT_UTF8", "INPUT_DIGEST_MISMATCH"]),
    ("a missing lock", lambda r: (r.root / ".agent-policy.lock").unlink(), ["LOCK_MISSING"]),
    ("config and lock toolchains disagree",
     lambda r: r.edit_config("revision: 0123456789abcdef0123456789abcdef01234567", "revision: " + "f" * 40),
     ["LOCK_TOOLCHAIN_MISMATCH", "CONFIG_DIGEST_MISMATCH"]),
    ("the lock's toolchain edited", lambda r: _edit_lock(r, lambda d: d["toolchain"].update(revision="e" * 40)),
     ["LOCK_TOOLCHAIN_MISMATCH"]),
    ("the config edited without regenerating", lambda r: r.edit_config("schema: 2\n", "# a comment\nschema: 2\n"),
     ["CONFIG_DIGEST_MISMATCH"]),
    ("the lock records another output digest",
     lambda r: _edit_lock(r, lambda d: d["outputs"][-1].update(sha256="0" * 64)), ["LOCK_STALE"]),
    ("the lock records another input digest",
     lambda r: _edit_lock(r, lambda d: d["inputs"][0].update(sha256="0" * 64)), ["INPUT_DIGEST_MISMATCH"]),
    ("a disabled output still present",
     lambda r: r.edit_config("renderer: github-review-json-adapter-v1, context: review, enabled: true",
                             "renderer: github-review-json-adapter-v1, context: review, enabled: false"),
     ["CONFIG_DIGEST_MISMATCH", "LOCK_STALE", "OUTPUT_UNLISTED"]),
    ("an output no longer configured, still on disk",
     lambda r: r.edit_config("  - {path: docs/review/github-review.json, renderer: github-review-json-adapter-v1, context: review, "
                             "enabled: true}\n", ""),
     ["CONFIG_DIGEST_MISMATCH", "LOCK_STALE", "OUTPUT_UNLISTED"]),
    ("pr-review disabled, Skill still present", lambda r: r.edit_config("[pr-review]", "[]"),
     ["CONFIG_DIGEST_MISMATCH", "LOCK_STALE", "LOCK_STALE", "LOCK_STALE", "OUTPUT_UNLISTED", "OUTPUT_UNLISTED", "OUTPUT_UNLISTED"]),
    ("an output's directory is a symlink", lambda r: _symlinked_dir(r, "docs/review"), ["PATH_SYMLINK", "PATH_SYMLINK"]),
    ("an output is a symlink to an identical copy",
     lambda r: (r.write("docs/copy.md", r.read(SEMANTIC)), _replace(r, SEMANTIC, lambda p: p.symlink_to("../copy.md"))),
     ["PATH_SYMLINK"]),
    ("a module's directory is a symlink", lambda r: _symlinked_dir(r, "policy/core"), ["PATH_SYMLINK"]),
    ("the Skill directory is a symlink", lambda r: _symlinked_dir(r, ".agents/skills/pr-review"),
     ["PATH_SYMLINK", "PATH_SYMLINK", "PATH_SYMLINK", "PATH_SYMLINK"]),
    ("a symlink planted in the Skill tree", lambda r: (r.root / ".agents/skills/pr-review/link.md").symlink_to("SKILL.md"),
     ["PATH_SYMLINK"]),
    ("the lock is a symlink", lambda r: (r.write("lock-copy", r.read(".agent-policy.lock")),
                                         _replace(r, ".agent-policy.lock", lambda p: p.symlink_to("lock-copy"))), ["PATH_SYMLINK"]),
    ("an output is a FIFO", lambda r: _replace(r, SEMANTIC, lambda p: os.mkfifo(p)), ["PATH_NOT_REGULAR"]),
    ("an output is a hard link", lambda r: os.link(r.root / SEMANTIC, r.root / "docs/alias.md"), ["PATH_NOT_REGULAR"]),
    ("an output is a directory", lambda r: _replace(r, SEMANTIC, lambda p: p.mkdir()), ["PATH_NOT_REGULAR"]),
    ("an output's directory is a file", lambda r: (shutil.rmtree(r.root / "docs/review"), r.write("docs/review", b"x")),
     ["PATH_NOT_REGULAR", "PATH_NOT_REGULAR"]),
    ("a name that is not UTF-8 in the Skill tree",
     lambda r: (r.root / ".agents/skills/pr-review").joinpath(os.fsdecode(b"bad\xff.md")).write_bytes(b"x"), ["PATH_BAD_NAME"]),
    ("a FIFO planted in the Skill tree", lambda r: os.mkfifo(r.root / ".agents/skills/pr-review/pipe"), ["PATH_NOT_REGULAR"]),
    ("a sparse giant output", lambda r: os.truncate(r.root / SEMANTIC, 65 * 1024 * 1024), ["TOO_LARGE"]),
    ("a Skill tree too deep", lambda r: (r.root / ".agents/skills/pr-review" / "/".join("d" * 17)).mkdir(parents=True),
     ["TOO_DEEP", "OUTPUT_UNLISTED"]),
]


@pytest.mark.parametrize(("change", "codes"), [(c, k) for _, c, k in FAILS], ids=[i for i, _, _ in FAILS])
def test_each_difference_fails_check(repo: Any, change: Callable[[Any], object], codes: list[str]) -> None:
    change(repo)
    with pytest.raises(VerificationError) as e:
        check_policy(repo.root)
    assert sorted(f.code for f in e.value.findings) == sorted(codes), e.value
    assert e.value.exit_code == 1


CONFIG_REFUSALS = [
    ("an output path in .github/", "path: docs/review/policy-context.md", "path: .github/REVIEW_GUIDELINES.md", "PATH_RESERVED"),
    ("an output path under .agents/", "path: docs/review/policy-context.md", "path: .agents/review.md", "PATH_RESERVED"),
    ("an output path with ..", "path: docs/review/policy-context.md", "path: docs/../../outside.md", "PATH_NOT_NORMAL"),
    ("an unknown renderer", "renderer: policy-context-md", "renderer: policy-context-v2", "UNKNOWN_RENDERER"),
    ("the semantic projection disabled", "renderer: policy-context-md, context: review, enabled: true",
     "renderer: policy-context-md, context: review, enabled: false", "ADAPTER_UNBOUND"),
    ("a duplicate key", "schema: 2\n", "schema: 2\nschema: 2\n", "YAML_DUPLICATE_KEY"),
]


@pytest.mark.parametrize(("old", "new", "code"), [(o, n, c) for _, o, n, c in CONFIG_REFUSALS], ids=[i for i, _, _, _ in CONFIG_REFUSALS])
def test_a_refused_config_is_exit_2(repo: Any, cli: Any, old: str, new: str, code: str) -> None:
    repo.edit_config(old, new)
    rc, out = cli("policy", "check", "--root", str(repo.root), "--json")
    assert rc == 2 and out["ok"] is False and out["errors"][0]["code"] == code, out


def test_an_unknown_renderer_in_the_lock_is_refused(repo: Any) -> None:
    _edit_lock(repo, lambda d: d["outputs"][-1].update(renderer="policy-context-v2"))
    with pytest.raises(InputError) as e:
        check_policy(repo.root)
    assert e.value.code == "UNKNOWN_RENDERER"


def test_a_missing_config_is_exit_2(tmp_path: Path, cli: Any) -> None:
    rc, out = cli("policy", "check", "--root", str(tmp_path), "--json")
    assert rc == 2 and out["errors"][0]["code"] == "CONFIG_MISSING"


@pytest.mark.parametrize("command", ["check", "generate"])
def test_a_missing_config_says_how_to_name_the_root(tmp_path: Path, cli: Any, command: str) -> None:
    rc, out = cli("policy", command, "--root", str(tmp_path), "--json")
    assert rc == 2 and out["errors"][0]["code"] == "CONFIG_MISSING"
    assert f"at the root {tmp_path}: run it in the repository's root, or name the root with --root DIR" in out["errors"][0]["detail"]


def test_a_symlinked_config_fails(repo: Any) -> None:
    repo.write("real.yml", repo.read(".agent-policy.yml"))
    _replace(repo, ".agent-policy.yml", lambda p: p.symlink_to("real.yml"))
    with pytest.raises(VerificationError) as e:
        check_policy(repo.root)
    assert e.value.code == "PATH_SYMLINK"


def test_a_root_that_is_a_symlink_is_refused(repo: Any, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(repo.root)
    with pytest.raises(VerificationError) as e:
        check_policy(tmp_path / "link")
    assert e.value.code == "ROOT_SYMLINK"


def test_failures_are_reported_in_json_with_paths(repo: Any, cli: Any) -> None:
    (repo.root / SEMANTIC).unlink()
    rc, out = cli("policy", "check", "--root", str(repo.root), "--json")
    assert rc == 1 and out == {"schema": 1, "ok": False, "errors": [{"code": "OUTPUT_MISSING", "path": SEMANTIC, "detail": "the file does not exist"}]}


def test_check_never_reads_the_current_directory(repo: Any, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "policy/core").mkdir(parents=True)
    (elsewhere / ".agent-policy.yml").write_bytes(b"schema: 2\nschema: 2\n")
    (elsewhere / "policy/core/evidence.md").write_bytes(b"poison\n")
    monkeypatch.chdir(elsewhere)
    rc, out = cli("policy", "check", "--root", str(repo.root), "--json")
    assert rc == 0 and out["ok"] is True
    monkeypatch.chdir(repo.root.parent)
    rc, out = cli("policy", "check", "--root", repo.root.name, "--json")
    assert rc == 0 and out["root"] == str(repo.root)


AUDIT = textwrap.dedent("""
    import json, os, sys
    root = sys.argv[1]
    from attest.cli import main, build_app
    import attest.policy, attest.policy._manage, ruamel.yaml, ruamel.yaml.resolver, ruamel.yaml.nodes  # imports are not reads of the tree
    build_app()
    events = []
    WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    def hook(name, args):
        if name == "open":
            path, mode, flags = args
            events.append(["open", str(path), str(mode), int(flags or 0) & WRITE])
        elif name.startswith("socket.") or name in ("os.chdir", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.chmod"):
            events.append([name, repr(args)[:200], "", 0])
    sys.addaudithook(hook)
    rc = main(["policy", "check", "--root", root, "--json"])
    sys.stderr.write(json.dumps({"rc": rc, "events": events}) + "\\n")
""")


def test_check_opens_nothing_for_writing_no_socket_and_nothing_outside_the_root(repo: Any, tmp_path: Path) -> None:
    script = tmp_path / "audit.py"
    script.write_text(AUDIT)
    out = subprocess.run([sys.executable, str(script), str(repo.root)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    record = json.loads(out.stderr.strip().splitlines()[-1])
    assert record["rc"] == 0, out
    events = record["events"]
    assert [e for e in events if e[0] != "open"] == []
    assert [e for e in events if e[3]] == [], "opened for writing"
    prefixes = (str(repo.root), sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parents[2] / "attest"), "/proc/self/")
    absolute = [e[1] for e in events if e[1].startswith("/")]
    assert [p for p in absolute if p != "/" and not p.startswith(prefixes)] == []  # "/": where open_root starts
    # Every read below the root was relative to a directory descriptor, one component at a time.
    assert any(e[1] == ".agent-policy.yml" for e in events) and all("/" not in e[1] or e[1].startswith("/") for e in events)


def _can_mount() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    return subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True).returncode == 0


@pytest.mark.root
@pytest.mark.skipif(not _can_mount(), reason="needs unshare -m and mount (root or user namespaces)")
def test_check_passes_on_a_read_only_mount_and_generate_cannot_write_there(repo: Any) -> None:
    script = textwrap.dedent(f"""
        set -e
        mount --bind {repo.root} {repo.root}
        mount -o remount,bind,ro {repo.root}
        if touch {repo.root}/probe 2>/dev/null; then echo "still writable"; exit 3; fi
        {sys.executable} -m attest policy check --root {repo.root} --json
        {sys.executable} -m attest policy generate --root {repo.root} --json || true
    """)
    (repo.root / SEMANTIC).chmod(0o444)
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    check_out, generate_out = (json.loads(line) for line in out.stdout.strip().splitlines())
    assert check_out["ok"] is True and len(check_out["outputs"]) == 5
    # Everything is already current: generate has nothing to write, so even a read-only tree is fine.
    assert generate_out["ok"] is True and generate_out["written"] == []


@pytest.mark.root
@pytest.mark.skipif(not _can_mount(), reason="needs unshare -m and mount (root or user namespaces)")
def test_generate_on_a_read_only_tree_that_needs_a_write_is_a_usage_error(repo: Any) -> None:
    (repo.root / SEMANTIC).unlink()
    script = textwrap.dedent(f"""
        set -e
        mount --bind {repo.root} {repo.root}
        mount -o remount,bind,ro {repo.root}
        {sys.executable} -m attest policy generate --root {repo.root} --json || echo "rc=$?"
    """)
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "rc=2", out.stdout + out.stderr
    assert json.loads(lines[0])["errors"][0] == {"code": "BAD_OUTPUT_PATH", "path": SEMANTIC,
                                                  "detail": "cannot write the generated file: Read-only file system"}
    assert not (repo.root / SEMANTIC).exists()


def test_an_undecodable_name_is_reported_readably(repo: Any, cli: Any) -> None:
    (repo.root / ".agents/skills/pr-review").joinpath(os.fsdecode(b"bad\xff.md")).write_bytes(b"x")
    rc, out = cli("policy", "check", "--root", str(repo.root), "--json")
    assert rc == 1 and out["errors"] == [{"code": "PATH_BAD_NAME", "path": ".agents/skills/pr-review/bad\\xff.md",
                                          "detail": "a name that is not valid UTF-8 in the generated Skill tree"}]
    assert repo.generate_codes() == ["PATH_BAD_NAME"]
