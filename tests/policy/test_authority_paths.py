"""Path confinement: one pure function, one table per concern."""

from __future__ import annotations

import pytest

from attest._safefs import Kind
from attest.policy import PathRole, check_authority_path, kind_of_git_mode

OUT, M, S = PathRole.OUTPUT, PathRole.MODULE, PathRole.SKILL

LEXICAL = [
    # (path, role, code or None)
    ("docs/review/policy-context.md", OUT, None),
    ("review.json", OUT, None),
    ("docs/.github/x.md", OUT, "PATH_RESERVED"),    # no dot component at any depth
    ("policy/other/x.md", OUT, None),               # not a module namespace
    ("policy/core/evidence.md", M, None),
    ("policy/security/deep/secrets.md", M, None),
    (".agents/skills/pr-review/SKILL.md", S, None),
    (".agents/skills/pr-review/references/procedure.md", S, None),
    (".agent-policy.yml", PathRole.CONFIG, None),
    (".agent-policy.lock", PathRole.LOCK, None),
    # one spelling only: refused, never normalized
    ("", OUT, "PATH_NOT_NORMAL"),
    ("/etc/passwd", OUT, "PATH_ABSOLUTE"),
    ("//x", OUT, "PATH_ABSOLUTE"),
    ("docs\\x.md", OUT, "PATH_BACKSLASH"),
    ("docs/../x.md", OUT, "PATH_NOT_NORMAL"),
    ("../x.md", OUT, "PATH_NOT_NORMAL"),
    ("./x.md", OUT, "PATH_NOT_NORMAL"),
    ("docs/.", OUT, "PATH_NOT_NORMAL"),
    ("docs//x.md", OUT, "PATH_NOT_NORMAL"),
    ("docs/", OUT, "PATH_NOT_NORMAL"),
    (".agents/skills/pr-review/../x.md", S, "PATH_NOT_NORMAL"),
    ("policy/core/../../x.md", M, "PATH_NOT_NORMAL"),
    # .git in every spelling git refuses, at any depth
    (".git/config", OUT, "PATH_DOTGIT"),
    ("docs/.git/x", OUT, "PATH_DOTGIT"),
    (".GIT/x", OUT, "PATH_DOTGIT"),
    (".git./x", OUT, "PATH_DOTGIT"),
    (".git /x", OUT, "PATH_DOTGIT"),
    ("git~1/x", OUT, "PATH_DOTGIT"),
    (".git::$INDEX_ALLOCATION/x", OUT, "PATH_DOTGIT"),
    (".g\u200cit/x", OUT, "PATH_DOTGIT"),
    ("policy/core/.git", M, "PATH_DOTGIT"),
    (".agents/skills/pr-review/.Git", S, "PATH_DOTGIT"),
    # names the closed inventory refuses
    ("docs/a\x01.md", OUT, "PATH_BAD_NAME"),
    ("docs/a\u202e.md", OUT, "PATH_BAD_NAME"),
    ("docs/" + "a" * 256, OUT, "PATH_BAD_NAME"),
    ("/".join(["abcdefgh"] * 600), OUT, "PATH_BAD_NAME"),
    ("docs/\udcff.md", OUT, "PATH_BAD_NAME"),
    # reserved namespaces
    (".github/review.md", OUT, "PATH_RESERVED"),
    (".GitHub/workflows/x.yml", OUT, "PATH_RESERVED"),
    (".github", OUT, "PATH_RESERVED"),
    (".agents/skills/pr-review/SKILL.md", OUT, "PATH_RESERVED"),
    (".agents/other.md", OUT, "PATH_RESERVED"),
    (".AGENTS/x.md", OUT, "PATH_RESERVED"),
    (".agent-policy.yml", OUT, "PATH_RESERVED"),
    (".agent-policy.lock", OUT, "PATH_RESERVED"),
    (".Agent-Policy.yml", OUT, "PATH_RESERVED"),
    ("policy/core/generated.md", OUT, "PATH_RESERVED"),
    ("Policy/Review/x.md", OUT, "PATH_RESERVED"),
    (".github/x.md", M, "PATH_RESERVED"),
    ("docs/x.md", PathRole.CONFIG, "PATH_RESERVED"),
    ("x.lock", PathRole.LOCK, "PATH_RESERVED"),
    # no path git, GitHub or a tool gives runtime meaning (attack review 06/07), in any alias
    (".gitattributes", OUT, "PATH_RESERVED"),
    (".gitignore", OUT, "PATH_RESERVED"),
    (".gitmodules", OUT, "PATH_RESERVED"),
    (".mailmap", OUT, "PATH_RESERVED"),
    ("docs/.GitAttributes.md", OUT, "PATH_RESERVED"),
    (".vscode/settings.json", OUT, "PATH_RESERVED"),
    (".envrc", OUT, "PATH_RESERVED"),
    ("docs/.direnv/x.md", OUT, "PATH_RESERVED"),
    ("__pycache__/x.md", OUT, "PATH_RESERVED"),
    ("lib/Node_Modules/x.md", OUT, "PATH_RESERVED"),
    ("venv/x.md", OUT, "PATH_RESERVED"),
    ("GITHUB~1/x.md", OUT, "PATH_RESERVED"),
    (".github./x.md", OUT, "PATH_RESERVED"),
    ("policy/core./x.md", OUT, "PATH_RESERVED"),
    ("Policy/Core /x.md", OUT, "PATH_RESERVED"),
    ("policy/core::$DATA/x.md", OUT, "PATH_RESERVED"),
    ("CODEOWNERS", OUT, "OUTPUT_PATH"),
    ("docs/CODEOWNERS", OUT, "OUTPUT_PATH"),
    ("docs/x.py", OUT, "OUTPUT_PATH"),
    ("docs/x.pth", OUT, "OUTPUT_PATH"),
    ("x.sh", OUT, "OUTPUT_PATH"),
    ("x.so", OUT, "OUTPUT_PATH"),
    ("x.pyc", OUT, "OUTPUT_PATH"),
    ("docs/x.txt", OUT, "OUTPUT_PATH"),
    ("docs/x.md.", OUT, "OUTPUT_PATH"),
    # module namespace
    ("policy/x.md", M, "MODULE_PATH"),
    ("policy/core/x.txt", M, "MODULE_PATH"),
    ("policy/core/.md", M, "MODULE_PATH"),
    ("policy/pull-request/x.md", M, "MODULE_PATH"),
    ("Policy/core/x.md", M, "MODULE_PATH"),
    ("docs/x.md", M, "MODULE_PATH"),
    # the Skill's tree
    (".agents/skills/pr-review", S, "PATH_OUTSIDE_SKILL"),
    (".agents/skills/other/SKILL.md", S, "PATH_OUTSIDE_SKILL"),
    (".agents/skills/PR-REVIEW/SKILL.md", S, "PATH_OUTSIDE_SKILL"),
    ("docs/SKILL.md", S, "PATH_OUTSIDE_SKILL"),
]


@pytest.mark.parametrize(("path", "role", "code"), LEXICAL, ids=[f"{r.value}:{p[:40]!r}" for p, r, _ in LEXICAL])
def test_lexical_rules(path: str, role: PathRole, code: str | None) -> None:
    problem = check_authority_path(path, role)
    assert (problem.code if problem else None) == code, problem
    if problem is not None:
        assert problem.path == path


def test_a_non_string_is_refused() -> None:
    problem = check_authority_path(3, PathRole.OUTPUT)
    assert problem is not None and problem.code == "PATH_NOT_NORMAL"


D, F, L = Kind.DIR, Kind.FILE, Kind.SYMLINK

AGAINST_A_TREE = [
    # (path, kinds from the root down, code or None)
    ("docs/review/x.md", [D, D, F], None),
    ("docs/review/x.md", [L], "PATH_SYMLINK"),
    ("docs/review/x.md", [D, L], "PATH_SYMLINK"),
    ("docs/review/x.md", [D, D, L], "PATH_SYMLINK"),
    ("docs/review/x.md", [D, D, D], "PATH_NOT_REGULAR"),
    ("docs/review/x.md", [D, D, Kind.SPECIAL], "PATH_NOT_REGULAR"),
    ("docs/review/x.md", [D, D, Kind.HARDLINK], "PATH_NOT_REGULAR"),
    ("docs/review/x.md", [D, D, Kind.SPECIAL_MODE], "PATH_NOT_REGULAR"),
    ("docs/review/x.md", [D, F], "PATH_NOT_REGULAR"),
    ("docs/review/x.md", [D, Kind.SPECIAL], "PATH_NOT_REGULAR"),
    ("docs/review/x.md", [None], "OUTPUT_MISSING"),
    ("docs/review/x.md", [D, D, None], "OUTPUT_MISSING"),
]


@pytest.mark.parametrize(("path", "kinds", "code"), AGAINST_A_TREE)
def test_against_a_tree_no_link_at_any_level_and_a_regular_file_at_the_end(path: str, kinds: list[Kind | None], code: str | None) -> None:
    problem = check_authority_path(path, PathRole.OUTPUT, kinds)
    assert (problem.code if problem else None) == code, problem


@pytest.mark.parametrize(("role", "code"), [(PathRole.CONFIG, "CONFIG_MISSING"), (PathRole.LOCK, "LOCK_MISSING"),
                                            (PathRole.MODULE, "INPUT_MISSING"), (PathRole.SKILL, "OUTPUT_MISSING")])
def test_an_absent_file_has_the_code_of_its_role(role: PathRole, code: str) -> None:
    path = {PathRole.CONFIG: ".agent-policy.yml", PathRole.LOCK: ".agent-policy.lock", PathRole.MODULE: "policy/core/a.md",
            PathRole.SKILL: ".agents/skills/pr-review/SKILL.md"}[role]
    problem = check_authority_path(path, role, [None])
    assert problem is not None and problem.code == code


def test_lexical_refusals_come_before_any_tree_verdict() -> None:
    problem = check_authority_path("../x", PathRole.OUTPUT, [Kind.SYMLINK])
    assert problem is not None and problem.code == "PATH_NOT_NORMAL"


def test_kinds_that_stop_early_at_a_directory_are_a_caller_bug() -> None:
    with pytest.raises(ValueError):
        check_authority_path("a/b.md", PathRole.OUTPUT, [Kind.DIR])
    with pytest.raises(ValueError):
        check_authority_path("a.md", PathRole.OUTPUT, [Kind.DIR, Kind.FILE])


@pytest.mark.parametrize(("mode", "kind"), [("40000", D), ("040000", D), ("100644", F), ("100755", F), ("120000", L),
                                            ("160000", Kind.SPECIAL), ("100664", Kind.SPECIAL)])
def test_git_tree_modes_map_to_the_same_kinds(mode: str, kind: Kind) -> None:
    assert kind_of_git_mode(mode) is kind


def test_a_gitlink_on_the_way_is_refused() -> None:
    problem = check_authority_path("docs/sub/x.md", PathRole.OUTPUT, [D, kind_of_git_mode("160000")])
    assert problem is not None and problem.code == "PATH_NOT_REGULAR"
