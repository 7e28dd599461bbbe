"""A small deterministic example agent: what an agent CLI does, without a model (docs/review-agent.md).

`attest review agent` gives it the invocation prompt on standard input; it reads the change from
the frozen, verified change image (``$ATTEST_IMAGE_CHANGE``: ``surface.json`` and ``head/``) and
prints exactly one findings block. Its one rule is its own, not the repository's policy: a changed
line of a Python file that calls ``eval(`` runs text as code, a blocker. Every changed path it
read is in its coverage; a path whose content it could not read (binary, deleted) it says so.
"""

from __future__ import annotations

import json
import os
import re
import sys

RULE = re.compile(r"\beval\(")


def changed_lines(hunks: list[dict[str, dict[str, int]]]) -> list[int]:
    """The RIGHT (head) line numbers the hunks change."""
    lines: list[int] = []
    for h in hunks:
        start, count = h["right"]["start"], h["right"]["count"]
        lines.extend(range(start, start + count))
    return lines


def review(change: str) -> dict[str, object]:
    with open(os.path.join(change, "surface.json"), encoding="utf-8") as f:
        surface = json.load(f)
    findings: list[dict[str, object]] = []
    coverage: list[str] = []
    limitations: list[str] = []
    for p in surface["paths"]:
        path = p["path"]
        coverage.append(path)
        if p["status"] == "deleted":
            continue  # nothing of it is left to run
        if p["content"] != "text":
            limitations.append(f"{path}: {p['content']} content, not read")
            continue
        if not path.endswith(".py"):
            continue
        with open(os.path.join(change, "head", path), "rb") as f:
            # Lines as git numbers them (split after each newline only): a lone carriage return is
            # no line break to git, and so none here, or a call after one would hide on "another" line.
            text = f.read().split(b"\n")
        for n in changed_lines(p["hunks"]):
            if n <= len(text) and RULE.search(text[n - 1].decode("utf-8", "replace")):
                findings.append({"path": path, "line": n, "side": "RIGHT", "severity": "blocker",
                                 "title": "eval() runs its argument as code",
                                 "detail": "Whatever reaches this call executes with the program's rights. Parse the "
                                           "value instead (ast.literal_eval, int(), json.loads)."})
    return {"findings": findings, "coverage": coverage, "limitations": limitations}


def main() -> int:
    sys.stdin.read()  # the invocation prompt: this agent follows no instructions, it has its one rule
    doc = review(os.environ["ATTEST_IMAGE_CHANGE"])
    print("<findings>")
    print(json.dumps(doc, indent=1, sort_keys=True))
    print("</findings>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
