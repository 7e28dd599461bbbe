"""--state-dir is one option on every command: $ATTEST_STATE_DIR, else .attest-state in the current directory.

A missing state directory gets one behaviour: a command that writes into it creates it (mode 0700);
a command that only reads what another wrote there refuses it as UNREADABLE (exit 2; `attest exec`
125), naming the command that writes it and the option, and creates nothing. One case per command,
each the real console entry point in a subprocess, in a fresh current directory.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.build import RUNTIME_RECIPE, SKILL_RECIPE, make_toolchain_repo, write_lock

ZERO = "sha256:" + "0" * 64
SHA = "0" * 40


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_") or k == "ATTEST_BACKEND"}
    return {**env, **extra}


def attest(args: list[str], cwd: Path, **env: str) -> tuple[int, dict[str, object], str]:
    words = [*args[:args.index("--")], "--json", *args[args.index("--"):]] if "--" in args else [*args, "--json"]
    out = subprocess.run([sys.executable, "-m", "attest", *words], capture_output=True, text=True, cwd=cwd, env=_env(**env),
                         stdin=subprocess.DEVNULL, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stdout.splitlines()
    assert lines, (out.returncode, out.stderr)
    return out.returncode, json.loads(lines[0]), out.stderr


@pytest.fixture(scope="module")
def given(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Inputs every command can name (none of them a state directory): a project, a key, a signed tree."""
    d = tmp_path_factory.mktemp("given")
    root = d / "proj"
    (root / "lockfiles" / "wheels").mkdir(parents=True)
    write_lock(root, root / "lockfiles" / "wheels")
    (d / "sha").write_text(make_toolchain_repo(root / "repo"))
    (root / "builders").mkdir()
    (root / "builders" / "runtime.toml").write_text(RUNTIME_RECIPE)
    (root / "builders" / "skill.toml").write_text(SKILL_RECIPE)
    (d / "tree").mkdir()
    (d / "tree" / "README").write_text("hello\n")
    assert attest(["keygen", "-o", str(d / "k.pem")], d)[0] == 0
    (d / "policy.toml").write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{d / "k.pub.pem"}"\n')
    assert attest(["attest", str(d / "tree"), "--key", str(d / "k.pem"), "-o", str(d / "att.json")], d)[0] == 0
    (d / "pins.toml").write_text("x = 1\n")
    (d / "result.json").write_text("{}\n")
    (d / "record.json").write_text("{}\n")
    (d / "identity.json").write_text("{}\n")
    (d / "skill").mkdir()
    return d


# -- commands that only read from the state directory: UNREADABLE, nothing created ---------------

READERS: dict[str, tuple[str, list[str]]] = {
    # command: (what writes the state it reads, its arguments but --state-dir)
    "exec": ("attest freeze", ["exec", "--image", f"a={ZERO}", "--", "true"]),
    "store ls": ("attest freeze", ["store", "ls"]),
    "store gc": ("attest freeze", ["store", "gc"]),
    "install skill": ("attest promote", ["install", "skill", "--pins", "G/pins.toml", "--dest", "G/dest", "--key", "G/k.pem"]),
    "bootstrap": ("attest promote", ["bootstrap", "--pins", "G/pins.toml", "--policy", "G/policy.toml", "--skill", "G/skill",
                                     "--installation", "G/att.json", "--repo", "G/proj/repo", "--identity", "G/identity.json",
                                     "--key", "G/k.pem", "-o", "G/handoff.json"]),
    "review start": ("attest bootstrap", ["review", "start", "--handoff", "G/att.json", "--policy", "G/policy.toml", "--repo",
                                          "G/proj/repo", "--semantic", "s", "--adapter", "a", "--identity", "G/identity.json"]),
    "review exec": ("attest bootstrap", ["review", "exec", "--handoff", "G/att.json", "--policy", "G/policy.toml", "-o", "G/out.json",
                                         "--", "true"]),
    "review recheck": ("attest review start", ["review", "recheck", "--review", "r1"]),
    "review serialize": ("attest review start", ["review", "serialize", "--review", "r1", "--result", "G/result.json", "-o", "G/p.json",
                                                 "--key", "G/k.pem"]),
    "merge-gate check": ("attest review start", ["merge-gate", "check", "--record", "G/record.json", "--policy", "G/policy.toml",
                                                 "--identity", "G/identity.json"]),
    "merge-gate merge": ("attest review start", ["merge-gate", "merge", "--record", "G/record.json", "--policy", "G/policy.toml",
                                                 "--github", "o/r", "--pr", "1"]),
}


def _words(args: list[str], given: Path) -> list[str]:
    return [str(given) + a[1:] if a.startswith("G/") else a for a in args]


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_missing_state_is_unreadable_for_a_command_that_only_reads_it(command: str, given: Path, tmp_path: Path) -> None:
    writer, args = READERS[command]
    rc, doc, _ = attest(_words(args, given), tmp_path)
    assert rc == (125 if command == "exec" else 2), doc
    [error] = doc["errors"]  # type: ignore[misc]
    assert error["code"] == "UNREADABLE" and error["path"] == str(tmp_path / ".attest-state"), error
    assert f"`{writer}" in error["detail"] and "--state-dir DIR" in error["detail"] and "$ATTEST_STATE_DIR" in error["detail"], error
    assert not (tmp_path / ".attest-state").exists()


@pytest.mark.parametrize("frozen_into", [False, True])
def test_exec_of_an_image_the_state_does_not_hold_says_how_to_name_the_right_state(frozen_into: bool, tmp_path: Path) -> None:
    """A state directory that exists but holds no store (only fetched into), or not that image: NOT_IN_STORE, and how to
    name the state directory the image was frozen into, never a staging failure."""
    state = tmp_path / ".attest-state"
    state.mkdir(mode=0o700)
    if frozen_into:
        assert attest(["store", "gc"], tmp_path)[0] == 0  # makes the store, empty
    rc, doc, _ = attest(["exec", "--image", f"a={ZERO}", "--", "true"], tmp_path)
    assert rc == 125, doc
    [error] = doc["errors"]  # type: ignore[misc]
    assert error["code"] == "NOT_IN_STORE" and error["path"] == ZERO, error
    assert (f"in the store of {state};" if frozen_into else f"in {state}: nothing was frozen into") in error["detail"], error
    assert "--state-dir DIR or $ATTEST_STATE_DIR" in error["detail"], error


def test_a_reader_takes_the_state_from_the_option_then_the_environment(given: Path, tmp_path: Path) -> None:
    rc, doc, _ = attest(["store", "ls", "--state-dir", str(tmp_path / "named")], tmp_path, ATTEST_STATE_DIR=str(tmp_path / "env"))
    assert rc == 2 and doc["errors"][0]["path"] == str(tmp_path / "named")  # type: ignore[index]
    rc, doc, _ = attest(["store", "ls"], tmp_path, ATTEST_STATE_DIR=str(tmp_path / "env"))
    assert rc == 2 and doc["errors"][0]["path"] == str(tmp_path / "env")  # type: ignore[index]
    (tmp_path / "env").mkdir(mode=0o700)
    rc, doc, _ = attest(["store", "ls"], tmp_path, ATTEST_STATE_DIR=str(tmp_path / "env"))
    assert rc == 0 and doc["images"] == [], doc


# -- commands that write into the state directory: a missing one is created, mode 0700 ------------

def _writers(g: Path) -> dict[str, list[str]]:
    sha = (g / "sha").read_text()
    runtime, skill = str(g / "proj/builders/runtime.toml"), str(g / "proj/builders/skill.toml")
    return {
        # Run to success: the whole command wrote into the state it created.
        "fetch": ["fetch", "--lock", str(g / "proj/lockfiles/pylock.toml")],
        "freeze": ["freeze", str(g / "tree"), "--attestation", str(g / "att.json"), "--policy", str(g / "policy.toml")],
        "build skill": ["build", "skill", skill, "--skill-rev", sha],
        # Nothing fetched into STATE/cache yet: they create the state, then stop at NOT_IN_CACHE.
        "build runtime": ["build", "runtime", runtime, "--toolchain-rev", sha],
        "rebuild": ["rebuild", runtime, "--rev", sha],
        "rebuild-release": ["rebuild-release", "--toolchain-rev", sha, "--key", str(g / "k.pem"), "-o", str(g / "rr.json"),
                            "--runtime-recipe", runtime, "--skill-recipe", skill],
        "promote": ["promote", "--toolchain-rev", sha, "--pins", str(g / "pins.toml"), "--key", str(g / "k.pem"), "--policy",
                    str(g / "policy.toml"), "--unsafe-without-rebuilders", "--runtime-recipe", runtime, "--skill-recipe", skill],
    }


WRITERS = ["fetch", "freeze", "build skill", "build runtime", "rebuild", "rebuild-release", "promote"]
SUCCEEDS = {"fetch", "freeze", "build skill"}


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("how", ["default", "environment"])
def test_a_missing_state_is_created_by_a_command_that_writes_it(command: str, how: str, given: Path, tmp_path: Path) -> None:
    args = _writers(given)[command]
    state = tmp_path / ".attest-state" if how == "default" else tmp_path / "from-env"
    rc, doc, _ = attest(args, tmp_path, **({"ATTEST_STATE_DIR": str(state)} if how == "environment" else {}))
    if command in SUCCEEDS:
        assert rc == 0 and doc["ok"] is True, doc
    else:
        assert [e["code"] for e in doc["errors"]] == ["NOT_IN_CACHE"], doc  # type: ignore[union-attr]
    st = os.lstat(state)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert os.listdir(state), "the command wrote nothing into the state it created"


def test_every_state_dir_option_is_one_definition() -> None:
    from attest.cli._app import STATE_DIR_HELP
    from tests.cli.test_metavars import _commands

    seen = []
    for path, command, _ in _commands():
        for param in command.params:
            if "--state-dir" in getattr(param, "opts", ()):
                seen.append(path)
                if path == "init github":  # a value written into the generated workflow, never a directory init uses
                    continue
                if path == "demo":  # the demo's own scratch state, never a deployment's: no $ATTEST_STATE_DIR (tests/test_demo.py)
                    continue
                assert param.help == STATE_DIR_HELP and param.required is False, path
    assert {"exec", "freeze", "store gc", "bootstrap", "install skill", "build runtime", "promote", "rebuild-release",
            "merge-gate check", "review start", "review serialize"} <= set(seen)


# -- the state directory is never inside the repository under review --------------------------------

@pytest.mark.parametrize("command", ["bootstrap", "review start"])
@pytest.mark.parametrize("made", [False, True])
def test_a_default_state_inside_the_repository_under_review_is_refused(command: str, made: bool, given: Path, tmp_path: Path) -> None:
    """Run in the pull request's checkout, the default .attest-state would be the checkout's (the author's): refused as such."""
    from support.gitrepo import git

    consumer = tmp_path / "consumer"
    consumer.mkdir()
    git(consumer, "init", "-q")
    (consumer / "README").write_text("consumer\n")
    git(consumer, "add", "README")
    git(consumer, "commit", "-q", "-m", "base")
    (consumer / "src").mkdir()
    if made:  # one a command made there earlier, private as a state must be: still the checkout's
        (consumer / "src" / ".attest-state").mkdir(mode=0o700)
    args = [a if a != "G/proj/repo" else str(consumer / ".git") for a in READERS[command][1]]
    rc, doc, _ = attest(_words(args, given), consumer / "src")
    assert rc == 1, doc
    [error] = doc["errors"]  # type: ignore[misc]
    assert error["code"] == "BOOTSTRAP_INPUT_IN_TREE", error
    assert f"the state directory {consumer / 'src' / '.attest-state'} lies inside the repository under review" in error["detail"]
    assert (consumer / "src" / ".attest-state").exists() is made  # nothing made there either
    # Named explicitly, inside is refused the same way.
    rc, doc, _ = attest([*_words(args, given), "--state-dir", str(consumer / "state")], tmp_path)
    assert rc == 1 and [e["code"] for e in doc["errors"]] == ["BOOTSTRAP_INPUT_IN_TREE"], doc  # type: ignore[union-attr]


DECIDERS = ["review exec", "review recheck", "review serialize", "merge-gate check", "merge-gate merge"]


@pytest.mark.parametrize("command", DECIDERS)
def test_a_default_state_in_any_git_work_tree_is_refused_by_a_command_that_decides_on_a_review(command: str, given: Path,
                                                                                                tmp_path: Path) -> None:
    """Run in a pull request's checkout, the default .attest-state is one its author could have committed, private and
    without the runs that block the head: a command deciding on a review never reads it (it knows no repository to
    compare with, so any work tree counts)."""
    from support.gitrepo import git

    checkout = tmp_path / "checkout"
    (checkout / ".attest-state" / "reviews").mkdir(parents=True, mode=0o700)
    os.chmod(checkout / ".attest-state", 0o700)
    git(checkout, "init", "-q")
    rc, doc, _ = attest(_words(READERS[command][1], given), checkout)
    assert rc == 1, doc
    [error] = doc["errors"]  # type: ignore[misc]
    assert error["code"] == "BOOTSTRAP_INPUT_IN_TREE" and error["path"] == str(checkout / ".attest-state"), error
    assert f"lies in the git work tree {checkout}" in error["detail"] and "--state-dir" in error["detail"], error
    # The deployment's own choice, by the option or the environment, is its own: this check does not apply.
    for how in ({"ATTEST_STATE_DIR": str(checkout / ".attest-state")}, {}):
        words = _words(READERS[command][1], given)
        cut = words.index("--") if "--" in words else len(words)
        words[cut:cut] = [] if how else ["--state-dir", str(checkout / ".attest-state")]
        rc, doc, _ = attest(words, checkout, **how)
        assert "BOOTSTRAP_INPUT_IN_TREE" not in [e["code"] for e in doc.get("errors", [])], doc  # type: ignore[union-attr]


def test_a_given_state_directory_costs_no_import_of_the_builder(tmp_path: Path) -> None:
    """`--state-dir DIR` is DIR: the builder package (65-85 ms, packaging's parsers with it) is imported for the default
    only, which it defines. Every review command names its state, and review recheck and serialize need nothing else of it."""
    script = ("import os, sys\n"
              "from attest.cli._app import state_to_read, state_to_write\n"
              "assert state_to_read(sys.argv[1], made_by='x') == sys.argv[1] and state_to_write(sys.argv[1]) == sys.argv[1]\n"
              "assert 'attest.builder' not in sys.modules, 'a given state directory imported attest.builder'\n"
              "os.environ['ATTEST_STATE_DIR'] = sys.argv[1] + '/env'\n"
              "assert state_to_write(None) == sys.argv[1] + '/env' and 'attest.builder' in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=_env(),
                         stdin=subprocess.DEVNULL, timeout=120)
    assert out.returncode == 0, out.stderr
