"""Shared fixtures: real filesystems under tmp_path, no mocks of os."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import collected
from support.caps import HAS_IMMUTABLE
from support.project_runtime import ProjectRuntime, project_runtime
from support.tmpfs import release_private_tmpfs, unseal, use_private_tmpfs
from support.trees import make_tree

pytest_plugins = ["support.reason_record"]

_TMP_LINE: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    # The controller chooses, before any worker or thread exists; xdist workers inherit its namespace and TMPDIR.
    if not hasattr(config, "workerinput"):
        _TMP_LINE.append(use_private_tmpfs())


def pytest_unconfigure(config: pytest.Config) -> None:
    # Frozen images are immutable. On the private tmpfs they go with it; on disk the flags are cleared once, here, over
    # every test's directory, so the next run's pytest can remove them (one chattr per test cost the suite 7 s of CPU).
    if not hasattr(config, "workerinput") and not release_private_tmpfs():
        unseal(config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> list[str]:
    return _TMP_LINE


def pytest_itemcollected(item: pytest.Item) -> None:
    collected.record(item)

# An ordinary user cannot set the immutable flag: the suite's images use the readonly backend,
# chosen explicitly the way such a user would ($ATTEST_BACKEND), never by a fallback in attest.
if not HAS_IMMUTABLE:
    os.environ.setdefault("ATTEST_BACKEND", "readonly")


@pytest.fixture(scope="session")
def shared_project_runtime(tmp_path_factory: pytest.TempPathFactory) -> ProjectRuntime:
    """This checkout's runtime at HEAD, built once per session for all workers (tests/support/project_runtime.py)."""
    return project_runtime(tmp_path_factory)


@pytest.fixture
def sample_tree(tmp_path: Path) -> Path:
    return make_tree(
        tmp_path / "tree",
        {
            "README": b"hello\n",
            "bin": {"tool": b"#!/bin/sh\necho hi\n"},
            "lib": {"pkg": {"__init__.py": b"", "mod.py": b"X = 1\n"}},
            "empty": None,
        },
    )


@pytest.fixture
def other_libpython(tmp_path: Path) -> dict[str, str]:
    """An environment whose loader picks a libpython with other bytes: "another interpreter" for the runtime guard."""
    import shutil
    import sysconfig

    name = sysconfig.get_config_var("INSTSONAME") or ""
    src = Path(sysconfig.get_config_var("LIBDIR") or "") / name
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not src.is_file():
        pytest.skip("this interpreter has no shared libpython to swap")
    with open("/proc/self/maps") as maps:
        if "/libpython" not in maps.read():  # Debian's python3.11 ships one but links its own statically
            pytest.skip("this interpreter does not load its libpython: there is none to swap under it")
    other = tmp_path / "other-lib"
    other.mkdir()
    shutil.copyfile(src, other / name)
    with open(other / name, "ab") as f:
        f.write(b"another build")
    return {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(other)}


# The fixtures that cost a real promotion (tests/support/deployment.py and its kin): every test using one is
# `slow`, as are the modules that promote or run the demo themselves. `just test-fast` runs the rest; CI runs all.
PROMOTING_FIXTURES = frozenset({"dep", "deployment"})
PROMOTING_MODULES = frozenset({"test_demo_chain.py", "test_tutorial.py", "test_release_promotion.py", "test_promote.py",
                               "test_install_skill.py", "test_promotion_log_checkpoint.py"})


# The longest test files, longest first (seconds of test time each in a root run on two workers, 2026-12-04, with two
# helper sessions loading the machine: the demo chain about 91, the tutorial 79, the build tests 69, release promotion
# 61 ...). `just test` hands out whole files (`--dist loadfile --no-loadscope-reorder`) in collection order, so putting
# these first makes the workers' ends meet (longest processing time first) instead of one worker starting the demo chain
# when the others are nearly done. A stale entry only costs time; a file not named here keeps its place after these and
# the other `slow` files.
LONGEST_FILES = ("test_demo_chain.py", "test_tutorial.py", "builder/test_build.py", "review/test_release_promotion.py",
                 "review/test_real_agent_cli.py", "review/test_attack_head_history.py", "cli/test_state_dir.py",
                 "builder/test_build_cli.py", "builder/test_hostile_steps.py", "builder/test_promote.py",
                 "inventory/test_attack_fast_walker.py", "review/test_reviewer_root.py", "builder/test_registry.py",
                 "test_attack_cli_backend_and_guard.py", "builder/test_attack_interpreter_startup_files.py",
                 "review/test_reviewer_session.py", "policy/test_strict_reader_properties.py", "inventory/test_races.py",
                 "builder/test_interpreter_closure.py", "test_collection.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROMOTING_FIXTURES & set(getattr(item, "fixturenames", ())) or item.path.name in PROMOTING_MODULES:
            item.add_marker(pytest.mark.slow)
    items[:] = longest_first(items)


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the files of LONGEST_FILES first (in that order), then the other files holding a `slow` test,
    then the rest; each file's tests stay together and in their own order."""
    tests = Path(__file__).parent
    rank: dict[Path, tuple[int, int]] = {}
    for item in items:
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else item.path.name
        first = rank.setdefault(item.path, (LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES) + 1,
                                            len(rank)))
        if first[0] > len(LONGEST_FILES) and item.get_closest_marker("slow"):
            rank[item.path] = (len(LONGEST_FILES), first[1])
    return sorted(items, key=lambda item: rank[item.path])
