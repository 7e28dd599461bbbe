"""The test files this session's own collection reached, recorded by tests/conftest.py for tests/test_collection.py."""

from __future__ import annotations

import pytest

#: ``tests/...py`` paths relative to the rootdir: the files of every test collected (before ``-k`` or ``-m`` deselect any).
FILES: set[str] = set()


def record(item: pytest.Item) -> None:
    FILES.add(item.nodeid.split("::", 1)[0])


def whole_configured_collection(config: pytest.Config) -> bool:
    """Whether this session collected what the configuration names (no paths given, nothing ignored), so that
    :data:`FILES` is the configured collection itself."""
    return (config.args_source is pytest.Config.ArgsSource.TESTPATHS and not config.getoption("ignore")
            and not config.getoption("ignore_glob") and not config.getoption("deselect"))
