"""The review procedure's guards after the handoff (docs/review.md "attest review start" and what follows it).

:func:`review_start` (``attest review start``) verifies the handoff, asks the host again and
requires the same repository, pull request and base, checks the frozen base against the base
tree, resolves the head, requires exactly one merge base, computes the changed surface, binds
the semantic and adapter projections (:func:`decide_bindings`, pure), retains their exact bytes
from the frozen base and writes the review state. :func:`recheck_review` (``attest review
recheck``) re-resolves what a state records (and re-establishes its frozen root:
:func:`reestablish_root`) and decides ``proceed``, ``refresh``, ``restart`` or ``fail``
(:func:`decide_recheck`, pure). :func:`run_review` (``review exec --review``) runs the reviewer
for one review and records its outcome; :func:`serialize_review` (``attest review serialize``)
rechecks immediately before writing, renders the GitHub payload from the retained adapter
(:func:`render_github_review`, pure), adds attest's own finding for every head change to the
base's authority material (:func:`authority_changes`, :func:`authority_findings`) and signs the
review record.

    >>> from attest.attestation import load_policy
    >>> from attest.review.bootstrap import IdentityFile
    >>> from attest.review.procedure import review_start
    >>> start = review_start(handoff="handoff.json", policy=load_policy("trust.toml"), state_dir="/var/lib/attest",
    ...                      repo="/srv/git/widgets.git", host=IdentityFile("identity.json"),
    ...                      semantic="docs/review/policy-context.md", adapter="docs/review/github-review.json")
    >>> start.to_json()["review"]
"""

from __future__ import annotations

from ._bindings import (
    ROLES,
    SEMANTIC_RENDERER,
    SUPPORTED_ADAPTERS,
    Binding,
    Bindings,
    bind_outputs,
    decide_bindings,
    parse_reproduced_outputs,
)
from ._codes import BindingCode, RecheckCode, ReviewStartCode, SerializeCode
from ._recheck import (
    OUTCOMES,
    RECHECKS_DIR,
    Recheck,
    RecheckFacts,
    RecheckOutcome,
    ReviewState,
    check_review_id,
    decide_recheck,
    host_from_state,
    load_review_state,
    parse_review_state,
    recheck_review,
)
from ._root import ReviewRoot, decide_root, reestablish_root
from ._serialize import (
    AUTHORITY_BLOCKING,
    AUTHORITY_SEVERITY,
    RECORDS_DIR,
    RESULTS_DIR,
    REVIEW_RECORD_PREDICATE,
    RUN_OUTCOMES,
    STATUSES,
    ReviewFacts,
    RunRecord,
    Serialized,
    anchor,
    authority_findings,
    check_adapter,
    check_run_options,
    claim_run,
    decide_head_history,
    parse_run_record,
    read_run_record,
    read_run_records,
    render_github_review,
    review_record_statement,
    review_status,
    run_record,
    run_review,
    serialize_review,
    write_run_record,
)
from ._start import (
    AUTHORITY_FINDING_PREFIX,
    AUTHORITY_KINDS,
    AUTHORITY_STATUSES,
    REVIEWS_DIR,
    STATE_FORMAT,
    AuthorityChange,
    HandoffEvidence,
    ReviewStart,
    authority_changes,
    authority_kind,
    decide_identity,
    describe_host,
    handoff_evidence,
    parse_authority_changes,
    path_kinds,
    read_base_authority,
    review_id,
    review_start,
    verify_handoff_evidence,
    write_review_state,
    write_state_file,
)

__all__ = [
    "AUTHORITY_BLOCKING",
    "AUTHORITY_FINDING_PREFIX",
    "AUTHORITY_KINDS",
    "AUTHORITY_SEVERITY",
    "AUTHORITY_STATUSES",
    "OUTCOMES",
    "RECHECKS_DIR",
    "RECORDS_DIR",
    "RESULTS_DIR",
    "REVIEWS_DIR",
    "REVIEW_RECORD_PREDICATE",
    "ROLES",
    "RUN_OUTCOMES",
    "SEMANTIC_RENDERER",
    "STATE_FORMAT",
    "STATUSES",
    "SUPPORTED_ADAPTERS",
    "AuthorityChange",
    "Binding",
    "BindingCode",
    "Bindings",
    "HandoffEvidence",
    "Recheck",
    "RecheckCode",
    "RecheckFacts",
    "RecheckOutcome",
    "ReviewFacts",
    "ReviewRoot",
    "ReviewStart",
    "ReviewStartCode",
    "ReviewState",
    "RunRecord",
    "SerializeCode",
    "Serialized",
    "anchor",
    "authority_changes",
    "authority_findings",
    "authority_kind",
    "bind_outputs",
    "check_adapter",
    "check_review_id",
    "check_run_options",
    "claim_run",
    "decide_bindings",
    "decide_head_history",
    "decide_identity",
    "decide_recheck",
    "decide_root",
    "describe_host",
    "handoff_evidence",
    "host_from_state",
    "load_review_state",
    "parse_authority_changes",
    "parse_reproduced_outputs",
    "parse_review_state",
    "parse_run_record",
    "path_kinds",
    "read_base_authority",
    "read_run_record",
    "read_run_records",
    "recheck_review",
    "reestablish_root",
    "render_github_review",
    "review_id",
    "review_record_statement",
    "review_start",
    "review_status",
    "run_record",
    "run_review",
    "serialize_review",
    "verify_handoff_evidence",
    "write_review_state",
    "write_run_record",
    "write_state_file",
]
