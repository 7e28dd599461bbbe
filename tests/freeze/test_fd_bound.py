"""A directory with more subdirectories than free descriptors can be frozen, checked and run.

check_image once held every sibling directory's descriptor open, so a tree with more than
~1,000 subdirectories under the usual ``ulimit -n 1024`` failed as a misleading
CHANGED_AFTER_FREEZE. The descriptors held are now bounded by the depth, whatever the shape.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from support.caps import BACKEND

_SCRIPT = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
    from attest.freeze import Store, freeze_tree, run_from_images
    from attest.inventory import inventory_tree
    src, state, backend = sys.argv[1], sys.argv[2], sys.argv[3]
    inv = inventory_tree(src)
    img = freeze_tree(src, inv, state, backend=backend)
    [entry] = Store(state).ls(check=True)
    assert entry.problems == (), entry.problems
    assert run_from_images(state, {"T": img.identity}, ["/bin/true"]) == 0
    assert freeze_tree(src, inv, state, backend=backend).reused
    print("OK")
    """
)


def test_many_sibling_directories_under_a_low_descriptor_limit(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for i in range(400):  # more sibling directories than the 128 descriptors allowed
        (src / f"d{i:03}").mkdir(parents=True)
        (src / f"d{i:03}" / "f").write_bytes(b"x\n")
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(src), str(tmp_path / "state"), BACKEND], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr[-3000:]
