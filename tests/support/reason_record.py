"""A pytest plugin that records every reason code the product actually produces during the run.

Every :class:`~attest.errors.Finding` (and so every ``AttestError``), every review-evidence
``Verdict`` and every wrapper ``WrapResult`` the package constructs in a test process is
recorded; under xdist each worker sends its record to the controller. When the whole suite has
run and passed, the session fails if any reason code of any layer was never produced: a code
that only appears in a test's text, or in a test that no longer runs, does not count.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

PRODUCED: set[str] = set()


def _record_init(cls: type, field: str) -> None:
    original = cls.__init__  # type: ignore[misc]

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        code = getattr(self, field)
        if code is not None:
            PRODUCED.add(str(code))

    cls.__init__ = init  # type: ignore[misc]


def pytest_configure(config: pytest.Config) -> None:
    from attest.errors import Finding
    from attest.review.evidence._model import Verdict
    from attest.review.evidence._wrap import WrapResult

    for cls in (Finding, Verdict, WrapResult):
        _record_init(cls, "code")
    config.stash[_KEY] = set()


_KEY = pytest.StashKey[set[str]]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:  # xdist controller: a worker's record
    node.config.stash[_KEY].update(node.workeroutput.get("reason_codes", ()))


def _whole_suite(session: pytest.Session) -> bool:
    """The run collected the configured test paths, unfiltered."""
    cfg = session.config
    opt = cfg.option
    return cfg.args_source is pytest.Config.ArgsSource.TESTPATHS and not opt.keyword and not opt.markexpr \
        and not getattr(opt, "lf", False) and not getattr(opt, "deselect", None) and not opt.collectonly


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    cfg = session.config
    if hasattr(cfg, "workeroutput"):  # an xdist worker: hand the record to the controller
        cfg.workeroutput["reason_codes"] = sorted(PRODUCED)
        return
    if exitstatus != 0 or not _whole_suite(session):
        return
    from tests.test_reason_codes import unproduced_codes

    missing = unproduced_codes(PRODUCED | cfg.stash[_KEY])
    if missing:
        reporter = cfg.pluginmanager.get_plugin("terminalreporter")
        msg = f"reason codes no test produced: {', '.join(missing)}"
        if reporter is not None:
            reporter.write_line(msg, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
