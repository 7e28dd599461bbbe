"""Attack review: files the interpreter reads at start that no check of attest saw.

``_refuse_startup_hook`` returned early for every target outside site-packages and
``check_ownership`` skipped every RECORD path starting with ``../``, so a toolchain wheel's
``.data/scripts`` or ``.data/data`` file landed in ``bin/`` unchecked. CPython's getpath reads two
such files beside the executable before anything of site.py runs, even under ``-I``:

- ``bin/python._pth`` replaces ``sys.path`` and switches ``site`` off: the guard's ``.pth`` is never
  processed, and a path of the toolchain's own package put first shadows a locked module (the
  locked ``bin/libdep-hello`` printed the toolchain's "SHADOWED", from the published image too);
- ``bin/pyvenv.cfg`` is read before the tree's own: ``include-system-site-packages = true`` gave
  every program of the runtime the build host's site-packages and ran their ``.pth`` files.

Each runtime is built for real in the sandbox from a hostile toolchain commit; each build must be
refused, naming the file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.build import RUNTIME_RECIPE, build_runtime_or_error, hostile_runtime_project

from attest.builder import BuildCode
from attest.errors import AttestError

PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"
CHECKED = RUNTIME_RECIPE + '\n[options]\nbytecode = "checked-hash"\n'

# A shadow libdep inside the toolchain's own package (owned by the toolchain, so no overlap) and
# a ._pth beside bin/python that puts it first on sys.path.
PTH = f"""
import sysconfig
std = sysconfig.get_paths()['stdlib']
body['toolchain/shadow/libdep/__init__.py'] = (b"VALUE = 'SHADOWED'\\n"
    b"def hello():\\n    print('hello from the toolchain, not libdep', VALUE)\\n")
body['toolchain-0.1.data/WHERE'] = ('../lib/{PY}/site-packages/toolchain/shadow\\n' + std + '\\n' + std + '/lib-dynload\\n').encode()
"""
PYVENV = """
import os, sys
body['toolchain-0.1.data/WHERE'] = ('home = ' + os.path.dirname(sys.executable) + '\\ninclude-system-site-packages = true\\n').encode()
"""
PLAIN = "body['toolchain-0.1.data/WHERE'] = b'x\\n'\n"


def _refused(tmp_path: Path, hook: str, recipe_text: str, landed: str) -> None:
    recipe, sha = hostile_runtime_project(tmp_path, hook, recipe_text)
    result = build_runtime_or_error(tmp_path, recipe, sha)
    assert isinstance(result, AttestError), f"the build accepted a runtime with {landed}"
    assert result.code == BuildCode.BUILD_STEP_FAILED and f"{landed!r} may not be installed" in result.detail, result


@pytest.mark.parametrize(("where", "landed"), [("scripts/python._pth", "bin/python._pth"), ("data/bin/python._pth", "bin/python._pth")])
@pytest.mark.parametrize("recipe_text", [RUNTIME_RECIPE, CHECKED], ids=["bytecode-none", "checked-hash"])
def test_a_toolchain_pth_file_beside_bin_python_is_refused(tmp_path: Path, where: str, landed: str, recipe_text: str) -> None:
    _refused(tmp_path, PTH.replace("WHERE", where), recipe_text, landed)


@pytest.mark.parametrize(("where", "landed"), [("scripts/pyvenv.cfg", "bin/pyvenv.cfg"), ("data/pyvenv.cfg", "pyvenv.cfg")])
def test_a_toolchain_pyvenv_cfg_is_refused(tmp_path: Path, where: str, landed: str) -> None:
    _refused(tmp_path, PYVENV.replace("WHERE", where), RUNTIME_RECIPE, landed)


@pytest.mark.parametrize(("where", "landed"), [
    ("data/attest-runtime.json", "attest-runtime.json"),  # what the guard compares the interpreter with
    ("scripts/python3", "bin/python3"),  # a second interpreter name beside the probed bin/python
    ("data/lib/python3.11/os.py", "lib/python3.11/os.py"),
    ("data/bin/python.exe._pth", "bin/python.exe._pth"),
])
def test_other_layout_files_are_refused(tmp_path: Path, where: str, landed: str) -> None:
    _refused(tmp_path, PLAIN.replace("WHERE", where), RUNTIME_RECIPE, landed)
