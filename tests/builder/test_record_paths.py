"""RECORD paths are judged where they land: a data file that comes back into site-packages is checked there."""

from __future__ import annotations

from pathlib import Path

import pytest

from attest.builder import BuildCode
from attest.builder._runtime import _record_paths, check_ownership


def _site(tmp_path: Path, rows: list[str]) -> Path:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    info = site / "toolchain-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in rows))
    return site


def test_a_data_path_back_into_site_packages_is_named_as_it_lands(tmp_path: Path) -> None:
    site = _site(tmp_path, ["toolchain/__init__.py", "../../../lib/python3.11/site-packages/000.pth", "../../../bin/tool",
                            "../../../lib/python3.11/site-packages/libdep/__init__.so"])
    assert _record_paths(str(site), "toolchain-0.1.dist-info") == ["toolchain/__init__.py", "000.pth", "../../../bin/tool",
                                                                   "libdep/__init__.so"]


@pytest.mark.parametrize(
    ("records", "found"),
    [
        ({"toolchain": ["toolchain/__init__.py", "../../../bin/tool"]}, set()),
        ({"toolchain": ["000.pth"]}, {"000.pth"}),  # the data-scheme .pth, as _record_paths now names it
        ({"toolchain": ["libdep/__init__.so"], "libdep": ["libdep/__init__.py"]}, {"libdep"}),
        ({"libdep": ["x.pth"]}, set()),  # a locked wheel's .pth: the worker's guard-order check refuses one that sorts first
        # Bytecode is its module's code: the toolchain's .pyc for a locked top-level module would run instead of it.
        ({"toolchain": ["__pycache__/six.cpython-311.pyc"], "six": ["six.py"]}, {"six"}),
        ({"toolchain": ["toolchain/__init__.py"], "six": ["six.py", "__pycache__/six.cpython-311.pyc"]}, set()),
        ({"toolchain": ["libdep/__pycache__/__init__.cpython-311.pyc"], "libdep": ["libdep/__init__.py"]}, {"libdep"}),
        # site.py imports these at every interpreter start, in every program of the runtime.
        ({"toolchain": ["sitecustomize.py"]}, {"sitecustomize.py"}),
        ({"toolchain": ["usercustomize/__init__.py"]}, {"usercustomize/__init__.py"}),
        ({"toolchain": ["__pycache__/sitecustomize.cpython-311.pyc"]}, {"__pycache__/sitecustomize.cpython-311.pyc"}),
        ({"libdep": ["sitecustomize.py"]}, set()),  # a locked wheel's: the worker's startup-hook rule refuses it at install
        # Outside site-packages (RECORD paths relative to it): what getpath or the guard reads at start.
        ({"toolchain": ["../../../bin/python._pth"]}, {"bin/python._pth"}),
        ({"toolchain": ["../../../bin/pyvenv.cfg", "../../../attest-runtime.json"]}, {"bin/pyvenv.cfg", "attest-runtime.json"}),
        ({"libdep": ["../../../bin/libdep-script", "../../../share/libdep/notes.txt"]}, set()),
        ({"toolchain": ["../../../../outside"]}, {"../outside"}),
    ],
)
def test_ownership_of_what_lands_in_site_packages(records: dict[str, list[str]], found: set[str]) -> None:
    problems = check_ownership(records, "toolchain")
    assert {f.path for f in problems} == found and all(f.code == BuildCode.DISTRIBUTION_OVERLAP for f in problems)


@pytest.mark.parametrize(
    ("scheme", "rel", "refused"),
    [
        ("purelib", "toolchain/__init__.py", False),
        ("purelib", "zz-late.pth", False),
        ("purelib", "0-early.pth", True),  # processed before the guard's .pth
        ("purelib", "_attest_runtime_guard/__init__.py", True),
        ("platlib", "_attest_runtime_guard.cpython-311-x86_64-linux-gnu.so", True),
        ("purelib", "sitecustomize.py", True),
        ("purelib", "usercustomize/__init__.py", True),
        ("platlib", "sitecustomize.cpython-311-x86_64-linux-gnu.so", True),
        ("purelib", "__pycache__/six.cpython-311.pyc", True),  # bytecode runs instead of its source
        ("purelib", "toolchain/__pycache__/cli.cpython-311.opt-1.pyc", True),
        ("data", "share/notes.txt", True),  # any other scheme landing in site-packages
        ("scripts", "../../../bin/tool", False),
        ("data", "../../../share/doc/notes.txt", False),
        ("scripts", "../../../bin/python._pth", True),  # getpath: replaces sys.path, switches site off
        ("scripts", "../../../bin/pyvenv.cfg", True),  # getpath reads it before the tree's own
        ("data", "../../../pyvenv.cfg", True),
        ("data", "../../../attest-runtime.json", True),  # the guard's reference
        ("scripts", "../../../bin/python3.11", True),
        ("data", "../../../lib/python3.11/os.py", True),
        ("headers", "../../../include/site/python3.11/x/x.h", False),
        ("data", "../../../../escape", True),
    ],
)
def test_the_startup_hook_rule(tmp_path: Path, scheme: str, rel: str, refused: bool) -> None:
    from attest.builder._worker import StartupHook, _refuse_startup_hook

    site = str(tmp_path / "site-packages")
    if refused:
        with pytest.raises(StartupHook):
            _refuse_startup_hook(scheme, f"{site}/{rel}", site)
    else:
        _refuse_startup_hook(scheme, f"{site}/{rel}", site)


@pytest.mark.parametrize(
    ("rel", "refused"),
    [("bin/tool", False), ("share/man/man1/tool.1", False), ("include/site/python3.11/pkg/x.h", False),
     ("pyvenv.cfg", True), ("attest-runtime.json", True), ("anything", True), ("bin/python._pth", True),
     ("share/python._pth", True), ("bin/pyvenv.cfg", True), ("bin/pybuilddir.txt", True), ("bin/python", True),
     ("bin/python3", True), ("bin/pythonw", True), ("bin/tool-python", False), ("lib/python3.11/os.py", True),
     ("lib64/x", False)],
)
def test_layout_problem(rel: str, refused: bool) -> None:
    from attest.builder._worker import layout_problem

    assert (layout_problem(rel) is not None) is refused
