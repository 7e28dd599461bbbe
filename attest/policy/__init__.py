"""policy layer: the repository's review authority (docs/policy.md).

Owns ``.agent-policy.yml`` and ``.agent-policy.lock`` (strict parsers, their agreement), the
one path-confinement rule for every authority path, the renderers (``policy-context-md``,
``github-review-json-adapter-v1``, ``pr-review-skill-v1``) and ``attest policy generate`` /
``check``. Uses the inventory, git and ``attest._safefs`` layers; knows nothing of review.

    >>> from attest.policy import check_policy
    >>> report = check_policy("path/to/repository")   # VerificationError lists every problem
    >>> [(o.path, o.sha256) for o in report.outputs]
"""

from __future__ import annotations

from ._codes import PolicyCode
from ._config import (
    GITHUB_REVIEW_JSON_ADAPTER_V1,
    POLICY_CONTEXT_MD,
    PR_REVIEW_SKILL_V1,
    Context,
    OutputSpec,
    PolicyConfig,
    Toolchain,
)
from ._lock import LockedInput, LockedOutput, PolicyLock, check_agreement
from ._manage import CheckReport, GenerateReport, check_policy, decide_check, generate_policy, observe, plan_generation
from ._paths import CONFIG_PATH, LOCK_PATH, SKILL_DIR, PathRole, check_authority_path, kind_of_git_mode
from ._render import Rendered, render_github_review_json_adapter_v1, render_outputs, render_policy_context_md
from ._skill import SkillFrontMatter, render_pr_review_skill_v1
from ._yaml import load_strict_yaml

__all__ = [
    "CONFIG_PATH",
    "GITHUB_REVIEW_JSON_ADAPTER_V1",
    "LOCK_PATH",
    "POLICY_CONTEXT_MD",
    "PR_REVIEW_SKILL_V1",
    "SKILL_DIR",
    "CheckReport",
    "Context",
    "GenerateReport",
    "LockedInput",
    "LockedOutput",
    "OutputSpec",
    "PathRole",
    "PolicyCode",
    "PolicyConfig",
    "PolicyLock",
    "Rendered",
    "SkillFrontMatter",
    "Toolchain",
    "check_agreement",
    "check_authority_path",
    "check_policy",
    "decide_check",
    "generate_policy",
    "kind_of_git_mode",
    "load_strict_yaml",
    "observe",
    "plan_generation",
    "render_github_review_json_adapter_v1",
    "render_outputs",
    "render_policy_context_md",
    "render_pr_review_skill_v1",
]
