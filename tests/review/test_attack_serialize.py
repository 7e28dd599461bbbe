"""Attack review of `attest review serialize` and `attest merge-gate check`.

Every test here performs one attack and asserts what a demanding user expects: the serializer or
the gate refuses, or the output states the review truthfully. Each test was written to FAIL
against the code it attacked (the finding it demonstrates); the comment above each says the attack
and why it matters. Where two fixes are possible (refuse earlier, or refuse later), the test
accepts either: an ``AttestError`` at the step that should refuse is the attack held.

Rendering is checked with markdown-it-py (CommonMark, the base of GitHub's Markdown; installed with
rich, a dependency of the project): the body and comments a host shows, not regular expressions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import test_bootstrap
import test_merge_gate as tm
import test_review_serialize as ts
import test_review_start

from attest._json import canonical_bytes
from attest.attestation import generate_key, load_policy, load_signer, sign_statement, statement, subject
from attest.errors import AttestError, VerificationError
from attest.policy import render_github_review_json_adapter_v1
from attest.review.bootstrap import IdentityFile
from attest.review.handoff import parse_result
from attest.review.merge import CI_RESULT_PREDICATE, merge_gate_check
from attest.review.procedure import REVIEW_RECORD_PREDICATE, ReviewFacts, render_github_review, run_review, serialize_review

CLEAN = tm.CLEAN
SEM = test_review_start.SEM


# -- rendering what a host shows -------------------------------------------------------------------------------


class _Node:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.children: list[_Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag: str) -> list[_Node]:
        out = [self] if self.tag == tag else []
        for c in self.children:
            if isinstance(c, _Node):
                out += c.find_all(tag)
        return out


class _Tree(HTMLParser):
    VOID = frozenset({"img", "br", "hr", "input"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("#root")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = _Node(tag)
        self.stack[-1].children.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID or tag not in [n.tag for n in self.stack]:
            return
        while len(self.stack) > 1:
            if self.stack.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.stack[-1].children.append(data)


def rendered(markdown: str) -> _Node:
    """The element tree a CommonMark host renders ``markdown`` to (raw HTML allowed, as GitHub allows some)."""
    from markdown_it import MarkdownIt

    tree = _Tree()
    tree.feed(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown))
    return tree.root


def _adapter() -> dict[str, Any]:
    return json.loads(render_github_review_json_adapter_v1("review", SEM, "a" * 64))


SURFACE = {"paths": [
    {"path": "src/a.py", "status": "modified", "old_mode": "100644", "new_mode": "100644", "old_oid": "1" * 40,
     "new_oid": "2" * 40, "content": "text", "hunks": [{"left": {"start": 12, "count": 1}, "right": {"start": 12, "count": 1}}]},
]}
FACTS = ReviewFacts("0" * 32, "c" * 40, "a" * 40, "a" * 40, "limited")


def payload(limitations: list[str], findings: list[dict[str, Any]], complete: bool = False) -> dict[str, Any]:
    result = parse_result(canonical_bytes({"complete": complete, "limitations": limitations, "findings": findings}))
    return render_github_review(result, FACTS, SURFACE, _adapter())


# -- Markdown in the reviewer's text: limitations ------------------------------------------------------------------

# ATTACK: the reviewer's text (a limitation) is placed at the start of a Markdown list item with only
# `&`, `<`, `>` escaped, so Markdown block syntax in it is interpreted, not shown. A limitation that
# is a link reference definition renders as an EMPTY bullet: the body silently loses a limitation
# (and limitations, unlike findings, have no fenced JSON copy), so a limited review no longer says
# why. A heading forges a big "attest review: complete" banner above the real (bold) status; a
# nested bullet forges a finding list inside the limitations; an image shows a picture (any text,
# "complete, 0 findings") instead of the words; a lone fence swallows the text into an empty code
# block. The reviewer's output is steered by the pull request under review (prompt injection), so
# this text is attacker-controlled. (The signed record still lists every limitation; the body, which
# is what people read on the host, does not.) Expected: each limitation renders as its literal text.
LIMITATION_ATTACKS = [
    pytest.param("[ok]: https://example.invalid/the-limitation-is-gone", id="link-reference-definition-vanishes"),
    pytest.param("# attest review: complete", id="heading-forges-complete"),
    pytest.param("* **[critical, blocking] F9** a finding the reviewer never reported", id="nested-fake-finding"),
    pytest.param("![attest review: complete, 0 findings](https://example.invalid/badge.png)", id="image-instead-of-text"),
    pytest.param("```", id="fence-swallows-text"),
]


@pytest.mark.parametrize("hostile", LIMITATION_ATTACKS)
def test_attack_limitation_markdown_is_rendered_not_shown(hostile: str) -> None:
    body = payload(["analysed only src/", hostile, "no network"], [])["body"]
    tree = rendered(body)
    lists = tree.find_all("ul")
    assert lists, body
    items = lists[0].find_all("li")
    shown = [(len([c for c in li.children if isinstance(c, _Node)]), li.text().strip()) for li in items]
    # Every limitation a plain text item, exactly its words, nothing more, nothing less.
    assert shown == [(0, "analysed only src/"), (0, hostile), (0, "no network")], body
    assert not tree.find_all("h1") and not tree.find_all("img")


# -- Markdown in the reviewer's text: finding messages -------------------------------------------------------------

# ATTACK: the same in a finding's message, in the body's list item and in an inline comment (GitHub
# renders both as Markdown). An image shows a picture instead of the words (a badge saying the
# review is complete, or a tracking pixel fetched by every reader); a link hides its destination
# behind innocent text. The message as written must be what a reader sees. (The fenced JSON copy
# in the body is intact; the human-readable line above it, which is what people read, is not.)
MESSAGE_ATTACKS = [
    pytest.param("![attest review: complete, nothing blocking](https://example.invalid/badge.png)", id="image"),
    pytest.param("apply [the suggested fix](https://example.invalid/exfiltrate?token=) before merging", id="link-hides-target"),
]


@pytest.mark.parametrize("hostile", MESSAGE_ATTACKS)
def test_attack_finding_message_markdown_is_rendered_not_shown(hostile: str) -> None:
    placed = payload([], [
        {"id": "F1", "severity": "high", "blocking": True, "message": hostile},                                    # in the body
        {"id": "F2", "severity": "high", "blocking": True, "message": hostile, "path": "src/a.py", "line": 12},  # inline
    ])
    items = rendered(placed["body"]).find_all("li")
    assert len(items) == 1
    kids = [c for c in items[0].children if isinstance(c, _Node)]
    assert [k.tag for k in kids] == ["strong"], placed["body"]   # the label, then only text
    assert items[0].text().strip() == f"[high, blocking] F1 {hostile}"
    (comment,) = placed["comments"]
    tree = rendered(comment["body"])
    assert not tree.find_all("img") and not tree.find_all("a"), comment["body"]
    assert tree.text().strip() == f"[high, blocking] F2: {hostile}"


# ATTACK: Unicode bidirectional controls (Trojan Source, CVE-2021-42574) in a message are copied into
# the body as they are. U+202E (right-to-left override) at the end of a message reverses what
# follows it on the line, so the location the serializer appends, "(src/a.py:12, RIGHT)", is shown
# as ")THGIR ,21:yp.a/crs(": the body misstates where the finding is. Control characters other
# than newlines are not escaped either. Expected: no bidi control reaches the Markdown text.
BIDI = {"\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"}


def test_attack_bidi_controls_reach_the_rendered_body() -> None:
    placed = payload(["only \u202ethe head\u202c was read"], [
        {"id": "F1", "severity": "high", "blocking": True, "message": "unsafe eval \u202e", "path": "src/a.py", "line": 3},
        {"id": "F2\u202e", "severity": "low", "blocking": False, "message": "m", "path": "src/a.py", "line": 12},
    ])
    text = re.sub(r"(`{3,})json\n.*?\n\1", "", placed["body"], flags=re.S)  # outside the fenced JSON copies
    assert not sorted(BIDI & set(text)), text
    assert not [c["body"] for c in placed["comments"] if BIDI & set(c["body"])]


# -- the merge gate, with records and CI results signed by real keys ---------------------------------------------------


H_OLD, H_NEW, BASE = "1" * 40, "2" * 40, "3" * 40


def identity(path: Path, head: str) -> Path:
    path.write_text(json.dumps({"repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": {"id": 99001, "number": 7},
                                "base": {"sha": BASE}, "head": {"sha": head}}))
    return path


def record_predicate(head: str, **change: Any) -> dict[str, Any]:
    """A review record's predicate of the documented shape (docs/review.md "review serialize" step 6)."""
    doc: dict[str, Any] = {
        "review": "0" * 32, "state_digest": "sha256:" + "0" * 64, "generation": 0, "status": "complete",
        "repository": {"id": 4242, "full_name": "acme/widgets"}, "pull_request": {"id": 99001, "number": 7},
        "base": {"commit": BASE, "tree": "4" * 40}, "head": head, "merge_base": BASE, "handoff_digest": "sha256:" + "5" * 64,
        "images": {n: "sha256:" + "6" * 64 for n in ("bootstrap", "runtime", "base", "procedure")},
        "change": {"identity": "sha256:" + "6" * 64},
        "projections": {"semantic": {"path": SEM, "sha256": "sha256:" + "7" * 64},
                        "adapter": {"path": test_review_start.ADA, "sha256": "sha256:" + "8" * 64}},
        "result": {"sha256": "sha256:" + "9" * 64}, "failure": None, "limitations": [], "authority_changes": [],
        "findings": {"total": 0, "blocking": 0, "inline": 0, "in_body": 0}, "event": "COMMENT",
        "confinement": {"confined": True}, "time": "2026-01-01T00:00:00Z"}
    doc.update(change)
    return doc


def sign_record(key: Path, predicate: dict[str, Any], out: Path) -> Path:
    out.write_bytes(sign_statement(statement([subject("review-payload", "a" * 64)], REVIEW_RECORD_PREDICATE, predicate),
                                   load_signer(str(key))))
    return out


def sign_ci(key: Path, head: str, out: Path) -> Path:
    from attest.review.merge import ci_result_predicate, sign_ci_result

    sign_ci_result(ci_result_predicate(repository_id=4242, full_name="acme/widgets", head=head, base=BASE, check="test",
                                       conclusion="success", run="r1"), load_signer(str(key)), out)
    return out


def empty_state(tmp: Path) -> Path:
    """A deployment state directory with no review history (the gate always reads one)."""
    state = tmp / "state"
    state.mkdir(mode=0o700)
    return state


def trust(tmp: Path, *, ci_roles: list[str] | None) -> tuple[Path, Path, Path]:
    """TRUST of a gate: the deployment key for review records; the CI key with ``ci_roles`` (None: no `predicates`)."""
    generate_key("ed25519", tmp / "deploy.pem")
    generate_key("ed25519", tmp / "ci.pem")
    ci = f"predicates = {json.dumps(ci_roles)}\n" if ci_roles is not None else ""
    policy = tmp / "trust.toml"
    policy.write_text("threshold = 1\n"
                      f'[[signers]]\nkind = "key"\npublic_key = "{tmp / "deploy.pub.pem"}"\npredicates = ["{REVIEW_RECORD_PREDICATE}"]\n'
                      f'[[signers]]\nkind = "key"\npublic_key = "{tmp / "ci.pub.pem"}"\n{ci}')
    return policy, tmp / "deploy.pem", tmp / "ci.pem"


# ATTACK: a CI key the deployment lists in TRUST without `predicates` (the policy format makes the
# field optional and "empty: any") signs a "complete, no blocking finding" review record. The gate
# only asks that SOME policy signer may sign the type, so the CI key, which by its nature is handed
# to CI jobs that build and run the pull request's own code, can forge the review half of the merge
# authorization and approve any head without a review. ADR-0008 keeps review and merge authorization
# in separate contexts; the gate should demand a signer that TRUST names explicitly for
# review-record/v1 (and one for ci-result/v1), never an any-type signer.
def test_attack_gate_accepts_a_review_record_from_a_signer_without_the_review_role(tmp_path: Path) -> None:
    policy, _deploy, ci_key = trust(tmp_path, ci_roles=None)
    forged = sign_record(ci_key, record_predicate(H_NEW), tmp_path / "forged-record.json")
    ci = sign_ci(ci_key, H_NEW, tmp_path / "ci.json")
    try:
        gate = merge_gate_check(record=forged, policy=load_policy(policy), host=IdentityFile(str(identity(tmp_path / "id.json", H_NEW))),
                                ci=[ci], required_checks=("test",), state_dir=empty_state(tmp_path))
    except VerificationError as e:
        assert [f.code for f in e.findings] == ["SIGNER_NOT_FOR_PREDICATE"]
        return
    assert not gate.authorized, "a review record signed by the CI key authorized a merge"


# ATTACK: the trusted-producer verdict is a bare "true"/"false"/"unknown": the gate never learns
# which head it was evaluated for. The evaluation reads the pull request (head H_OLD, which has
# clean trusted-producer evidence), then the author pushes H_NEW (already reviewed and CI'd by
# attest, e.g. a head the PR had before), and only then the gate's final host read sees H_NEW. The
# gate authorizes H_NEW with trusted-producer evidence that exists for H_OLD only. ADR-2026-07-23
# binds that evidence to the exact head; the gate should require the verdict's head to be the
# decided head (e.g. the producer returns (verdict, head_sha) and a difference is
# MERGE_TRUSTED_PRODUCER_MISSING).
def test_attack_trusted_producer_verdict_of_another_head_authorizes(tmp_path: Path) -> None:
    policy, deploy, ci_key = trust(tmp_path, ci_roles=[CI_RESULT_PREDICATE])
    record = sign_record(deploy, record_predicate(H_NEW), tmp_path / "record.json")
    ci = sign_ci(ci_key, H_NEW, tmp_path / "ci.json")
    ident = identity(tmp_path / "id.json", H_OLD)
    seen: list[str] = []

    def producer() -> tuple[str, str]:
        # What `attest evidence trusted-producer` does: read the pull request's head, judge its evidence.
        head = json.loads(ident.read_text())["head"]["sha"]
        seen.append(head)
        identity(ident, H_NEW)  # the author pushes while (or just after) the evidence is read
        # only H_OLD has a clean trusted-producer review; the verdict names the head it was evaluated for
        return ("true" if head == H_OLD else "false"), head

    try:
        gate = merge_gate_check(record=record, policy=load_policy(policy), host=IdentityFile(str(ident)), ci=[ci],
                                required_checks=("test",), state_dir=empty_state(tmp_path), trusted_producer=producer)
    except VerificationError:
        return  # refused: the head moved while the evidence was read
    assert seen == [H_OLD]
    assert not gate.authorized, f"{gate.head} was authorized on trusted-producer evidence of {seen[0]}"


# ATTACK: docs/review.md: "both predicates must have the documented shape (MERGE_RECORD_MALFORMED)".
# parse_review_record reads seven fields and ignores the rest, so a record that is internally
# contradictory authorizes: status "complete" next to a reviewer failure and no result, blocking 0
# next to two blocking findings in total... and a record lacking merge_base, images, projections,
# result, limitations and time entirely. Any producer allowed the predicate (a second deployment
# tool, an older serializer, a bug) can hand the gate a "complete" it never established.
@pytest.mark.parametrize("change", [
    pytest.param({"failure": {"code": "REVIEWER_FAILED", "detail": "exit 3"}, "result": None}, id="complete-and-failed"),
    pytest.param({"limitations": ["analysed nothing"]}, id="complete-with-limitations"),
    pytest.param({"findings": {"total": 2, "blocking": 0, "inline": 5, "in_body": -3}, "event": "REQUEST_CHANGES"},
                 id="counts-and-event-disagree"),
    pytest.param("minimal", id="undocumented-minimal-shape"),
])
def test_attack_gate_accepts_a_record_that_is_not_the_documented_shape(tmp_path: Path, change: Any) -> None:
    policy, deploy, ci_key = trust(tmp_path, ci_roles=[CI_RESULT_PREDICATE])
    if change == "minimal":
        full = record_predicate(H_NEW)
        predicate = {k: full[k] for k in ("review", "status", "repository", "pull_request", "head")}
        predicate |= {"base": {"commit": BASE}, "findings": {"blocking": 0}}
    else:
        predicate = record_predicate(H_NEW, **change)
    record = sign_record(deploy, predicate, tmp_path / "record.json")
    try:
        gate = merge_gate_check(record=record, policy=load_policy(policy), host=IdentityFile(str(identity(tmp_path / "id.json", H_NEW))),
                                ci=[sign_ci(ci_key, H_NEW, tmp_path / "ci.json")], required_checks=("test",),
                                state_dir=empty_state(tmp_path))
    except VerificationError as e:
        assert [f.code for f in e.findings] == ["MERGE_RECORD_MALFORMED"]
        return
    assert not gate.authorized, f"an inconsistent record authorized: {predicate}"


# -- serialize over real bootstraps, reviews and keys ------------------------------------------------------------------


def _reviewed(dep: Any, skill: Any, tmp: Path, result: Any = CLEAN) -> tuple[Any, str, Path]:
    s = ts.renaming_pr(dep, skill, tmp)
    review = test_review_start.start(dep, s).review
    return s, review, ts.exec_for(dep, s, review, tmp, result)


# ATTACK: "In order; a failure writes nothing" (docs/review.md, serialize). `--record` names a path
# that cannot be written (a missing directory): the command fails with BAD_OUTPUT_PATH (exit 2),
# yet the GitHub payload was already written to -o and the SIGNED record to STATE/records/<ID>.json.
# A pipeline that treats the failure as "nothing happened" still finds a payload ready to post, and
# a valid signed record sits in the state. Output paths are not checked before anything is written.
def test_attack_a_failing_record_path_still_leaves_payload_and_signed_record(dep: Any, skill: Any, tmp_path: Path) -> None:
    _s, review, result = _reviewed(dep, skill, tmp_path)
    with pytest.raises(AttestError) as ei:
        ts.serialize(dep, review, result, tmp_path, record=tmp_path / "no-such-dir" / "record.json")
    assert [f.code for f in ei.value.findings] == ["BAD_OUTPUT_PATH"]
    assert not (tmp_path / "payload.json").exists(), "the payload was written by a serialize that failed"
    assert not (dep.state / "records" / f"{review}.json").exists(), "a signed record was written by a serialize that failed"


# ATTACK: the same contract, failing on the state side: STATE/records is a planted symbolic link.
# The state layer refuses it (STATE_SYMLINK), but only after the payload was written to -o: a
# failed serialize leaves a payload whose record does not exist.
def test_attack_a_planted_records_link_fails_after_the_payload_was_written(dep: Any, skill: Any, tmp_path: Path) -> None:
    _s, review, result = _reviewed(dep, skill, tmp_path)
    records, aside = dep.state / "records", dep.state / "records.attack-aside"
    moved = records.exists()
    if moved:
        os.rename(records, aside)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    os.symlink(tmp_path / "elsewhere", records)
    try:
        with pytest.raises(AttestError) as ei:
            ts.serialize(dep, review, result, tmp_path)
    finally:
        os.unlink(records)
        if moved:
            os.rename(aside, records)
    assert [f.code for f in ei.value.findings] == ["STATE_SYMLINK"]
    assert not list((tmp_path / "elsewhere").iterdir())
    assert not (tmp_path / "payload.json").exists(), "the payload was written by a serialize that failed"


# ATTACK: -o and --record name the same file. serialize writes the payload, then the signed record
# over it, and reports success with a payload_digest the file no longer has: whatever posts
# "payload.json" to GitHub posts the DSSE envelope (or fails), and the record's subject names bytes
# that exist nowhere. The two outputs (and the --result input) must be distinct files.
def test_attack_payload_and_record_on_the_same_path(dep: Any, skill: Any, tmp_path: Path) -> None:
    _s, review, result = _reviewed(dep, skill, tmp_path)
    both = tmp_path / "out.json"
    try:
        done = serialize_review(state_dir=dep.state, review=review, result=result, out=both, record=both,
                                signer=load_signer(str(dep.key)))
    except AttestError as e:
        assert [f.code for f in e.findings] == ["BAD_OUTPUT_PATH"]
        return
    assert "sha256:" + hashlib.sha256(both.read_bytes()).hexdigest() == done.payload_digest, \
        "serialize succeeded but the payload file holds the record"


# ATTACK: review laundering on the same head. `review exec --review ID` can run again for a review
# that was already serialized: the run record is replaced, serialize signs a second record for the
# same review and the same exact head, and the gate takes whichever record it is handed. A complete
# review that found blocking findings is thus cleared by re-running the (nondeterministic, PR-steered)
# reviewer until it says "clean". ADR-2026-07-23: "A same-head non-clean review remains blocking even
# if a later clean review appears; only a new head can recover." Either refusing the second run /
# second serialization, or a gate that does not authorize the clean record, holds.
def test_attack_rerunning_a_review_launders_blocking_findings(dep: Any, skill: Any, tmp_path: Path) -> None:
    s, review, result = _reviewed(dep, skill, tmp_path, ts.RESULT)
    ts.serialize(dep, review, result, tmp_path, record=tmp_path / "record-1.json")
    policy, ci_key = tm.gate_trust(dep, tmp_path)
    ok = tm.ci(tmp_path, ci_key, s.c.head, s.c.base)
    first = tm.check(dep, policy, s, tmp_path / "record-1.json", [ok])
    assert [f.code for f in first.findings] == ["MERGE_BLOCKING_FINDINGS"]
    try:
        again = ts.exec_for(dep, s, review, tmp_path, CLEAN)  # the same review, the same head, run again
        ts.serialize(dep, review, again, tmp_path, record=tmp_path / "record-2.json")
    except AttestError:
        return  # refused: one review, one analysis
    gate = tm.check(dep, policy, s, tmp_path / "record-2.json", [ok])
    assert not gate.authorized, "a re-run of the same review on the same head cleared its blocking findings"


# ATTACK: a review run with `--unsafe-unconfined` (the reviewer runs as the caller, sees the host,
# can read the deployment's keys and state) is serialized into a record that says
# "confinement": {"confined": false}, and the merge gate authorizes it like any other: the gate
# never reads the confinement. The Unsafe option warns on the terminal and is recorded, and then
# the record it produced is merge authority anyway. Expected: only a confined review's record can
# authorize (or serialize refuses to sign an unconfined run as `complete`).
def test_attack_an_unconfined_review_authorizes_a_merge(dep: Any, skill: Any, tmp_path: Path) -> None:
    s = ts.renaming_pr(dep, skill, tmp_path)
    review = test_review_start.start(dep, s).review
    result = tmp_path / "result.json"
    run_review(state_dir=dep.state, review=review, handoff=s.handoff, policy=load_policy(dep.trust), argv=ts.printing(CLEAN),
               out=result, unsafe_unconfined=True)
    try:
        done = ts.serialize(dep, review, result, tmp_path, record=tmp_path / "record.json")
    except AttestError:
        return  # refused: an unconfined run is not a review a merge may rest on
    policy, ci_key = tm.gate_trust(dep, tmp_path)
    gate = tm.check(dep, policy, s, tmp_path / "record.json", [tm.ci(tmp_path, ci_key, s.c.head, s.c.base)])
    assert done.status == "complete"
    assert not gate.authorized, "a review by an unconfined reviewer authorized a merge"


def git_diff_hunks(repo: Path, base: str, head: str) -> dict[tuple[str, str], set[int]]:
    """(path, side) -> the lines GitHub can anchor a comment to: the hunks (with their 3 lines of context) of git's own
    diff with rename detection, as GitHub's pull-request diff has it (independent of attest)."""
    from support.gitrepo import git

    out = git(repo, "diff", "-U3", "-M", base, head)
    lines: dict[tuple[str, str], set[int]] = {}
    old = new = ""
    for line in out.splitlines():
        if line.startswith("--- "):
            old = line[6:] if line != "--- /dev/null" else ""
        elif line.startswith("+++ "):
            new = line[6:] if line != "+++ /dev/null" else ""
        elif m := re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line):
            ls, lc, rs, rc = int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)
            # GitHub names a file of its diff by its new path on both sides (a deleted file by its old one).
            lines.setdefault((new or old, "LEFT"), set()).update(range(ls, ls + lc))
            lines.setdefault((new or old, "RIGHT"), set()).update(range(rs, rs + rc))
    return lines


# ATTACK (transport truthfulness): GitHub's pull-request diff detects renames (git's default, 50%
# similarity); the serializer's surface does not, so a renamed-and-edited file is, for attest, a
# deleted path and an added one whose every line is "changed". It then anchors inline comments
# that GitHub cannot place: on the OLD path (not a file of GitHub's diff at all) and on unchanged
# lines of the new path far from the edit (not part of GitHub's diff). GitHub validates every
# comment of a review and rejects the whole review (422) for one unresolvable anchor, so none of
# the findings is posted; or, where it resolves, the comment sits on a line GitHub shows as
# unchanged. ADR-0008 "Platform adapter": "findings that cannot truthfully use a GitHub inline
# anchor require a lossless non-inline representation". Oracle: git's own rename-detecting diff.
def test_attack_renamed_file_anchors_comments_github_cannot_place(dep: Any, skill: Any, tmp_path: Path) -> None:
    from support.gitrepo import git

    c = test_bootstrap.make_consumer(tmp_path / "consumer", dep.sha)
    (c.path / "big.txt").write_text("".join(f"line {i} of a long enough file\n" for i in range(1, 21)))
    base = ts.commit(c.path, "a file of twenty lines")
    git(c.path, "checkout", "-qb", "pr")
    git(c.path, "mv", "big.txt", "renamed.txt")
    (c.path / "renamed.txt").write_text("".join(f"line {i} of a long enough file\n" if i != 10 else "line ten, edited\n"
                                                for i in range(1, 21)))
    c = test_bootstrap.Consumer(c.path, base, ts.commit(c.path, "rename and edit one line"))
    s = test_review_start.Started(c, Path(test_bootstrap.run(dep, skill, c, tmp_path).handoff),
                                  test_bootstrap.identity_file(tmp_path / "identity.json", c))
    review = test_review_start.start(dep, s).review
    result = ts.exec_for(dep, s, review, tmp_path, {"complete": True, "limitations": [], "findings": [
        {"id": "F1", "severity": "high", "blocking": True, "message": "the edited line", "path": "renamed.txt", "line": 10},
        {"id": "F2", "severity": "high", "blocking": True, "message": "an unchanged line", "path": "renamed.txt", "line": 1},
        {"id": "F3", "severity": "high", "blocking": True, "message": "the old line", "path": "big.txt", "line": 10, "side": "LEFT"},
    ]})
    ts.serialize(dep, review, result, tmp_path)
    placed = json.loads((tmp_path / "payload.json").read_bytes())
    github = git_diff_hunks(c.path, base, c.head)
    # git (and GitHub) see a rename: the old path is no file of the diff; line 10 of either side is, line 1 is not.
    assert not any(p == "big.txt" for p, _ in github) and 10 in github[("renamed.txt", "LEFT")]
    assert 1 not in github[("renamed.txt", "RIGHT")]
    unplaceable = [(x["path"], x["side"], x["line"]) for x in placed["comments"]
                   if x["line"] not in github.get((x["path"], x["side"]), set())]
    assert not unplaceable, f"inline comments GitHub's rename-detecting diff cannot place: {unplaceable}"
