#!/usr/bin/env python3
"""Regenerate lockfiles/pylock.toml (PEP 751) for attest's runtime and its build backend.

Resolution is pip's (``pip install --dry-run --report``, wheels only, for the running
interpreter); this script only turns pip's report into a strict, wheels-only pylock with
the URL and SHA-256 of every file. Run from the repository root with the project's venv:

    .venv/bin/python lockfiles/make_pylock.py        # needs the package registry
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_BACKEND = ["setuptools>=69"]


def main() -> int:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [r.split("#")[0].strip() for r in project["dependencies"]] + BUILD_BACKEND
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        # Only the public index: no local mirrors or find-links from the machine's pip config.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run",
                        "--index-url", "https://pypi.org/simple", "--ignore-installed", "--only-binary=:all:",
                        "--report", str(report), *requirements], check=True, env=env)
        doc = json.loads(report.read_text())
    lines = ['lock-version = "1.0"', 'created-by = "attest lockfiles/make_pylock.py (pip install --dry-run --report)"',
             f'requires-python = "=={sys.version_info.major}.{sys.version_info.minor}.*"', ""]
    for item in sorted(doc["install"], key=lambda i: i["metadata"]["name"].lower()):
        meta, info = item["metadata"], item["download_info"]
        url = info["url"]
        digest = info["archive_info"]["hashes"]["sha256"]
        filename = url.rsplit("/", 1)[-1]
        if not url.startswith("https://"):
            sys.exit(f"{filename}: resolved to {url}, not an https:// registry URL")
        if not filename.endswith(".whl"):
            sys.exit(f"{filename}: not a wheel; sdists are never locked")
        lines += ["[[packages]]", f'name = "{meta["name"]}"', f'version = "{meta["version"]}"',
                  "[[packages.wheels]]", f'name = "{filename}"', f'url = "{url}"', f'hashes = {{ sha256 = "{digest}" }}', ""]
    (ROOT / "lockfiles" / "pylock.toml").write_text("\n".join(lines))
    print(f"wrote lockfiles/pylock.toml: {len(doc['install'])} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
