"""What a build step prints never decides the host's memory (THREATS G).

``Sandbox.run`` captured a step's output whole (``subprocess.run(capture_output=True)``): a step
printing 512 MiB raised the host's peak memory by 1 GiB. The host now keeps only a bounded tail
of each stream in memory, spills the rest to capped files in staging (which no step can write),
and kills a step that prints past the cap (``STEP_OUTPUT_TOO_LARGE``).

The host side runs in a child process that establishes a real sandbox, runs one real confined
step and reports its own peak resident size (``ru_maxrss``) before and after the step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from attest.builder import BuildCode
from attest.builder._sandbox import MAX_STEP_OUTPUT, STEP_OUTPUT_TAIL

MIB = 1 << 20
# The host's peak may grow by the tails and buffers, never by anything near what the step printed.
GROWTH_LIMIT_KIB = 32 * 1024

_HOST = textwrap.dedent(
    """
    import json, os, resource, sys
    from attest.builder import Sandbox
    from attest.builder._sandbox import pick_step_uid
    from attest.errors import AttestError
    staging, code, cap = sys.argv[1], sys.argv[2], sys.argv[3]
    sandbox = Sandbox.establish(allow_unisolated_network=False)
    work = os.path.join(staging, "work")
    os.mkdir(work, 0o700)
    options = {} if cap == "default" else {"max_output": int(cap)}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = {}
    try:
        r = sandbox.run(["/usr/bin/python3", "-I", "-c", code], cwd=work, home=work, staging=staging, writable=[work],
                        uid=pick_step_uid(), **options)
        report.update(ok=True, stdout_len=len(r.stdout), stdout_tail=r.stdout[-16:].decode(),
                      stdout_size=getattr(r, "stdout_size", None), stdout_log=getattr(r, "stdout_log", None))
    except AttestError as e:
        report.update(ok=False, code=str(e.code), detail=e.detail)
    report["growth_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps(report))
    """
)


@pytest.fixture(autouse=True)
def _drop_logs(tmp_path: Path) -> Iterator[None]:
    """The spilled output is hundreds of MiB: not left on disk for pytest's last three runs."""
    yield
    shutil.rmtree(tmp_path / "stage-0123456789abcdef", ignore_errors=True)


def _step(tmp_path: Path, code: str, cap: int | str = "default") -> tuple[dict[str, Any], Path]:
    """Run ``code`` as a confined build step from a fresh host process: its report and the staging directory."""
    staging = tmp_path / "stage-0123456789abcdef"
    staging.mkdir(mode=0o700)
    done = subprocess.run([sys.executable, "-c", _HOST, str(staging), textwrap.dedent(code), str(cap)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), staging


def _logs(staging: Path) -> dict[str, int]:
    return {p.name.rsplit(".", 1)[1]: p.stat().st_size for p in staging.iterdir() if p.name.startswith(".step-output-")}


# Prints MiB mebibytes on FD in 1 MiB writes (stopping at a broken pipe), then leaves a marker:
# a step the host only cut off, rather than killed, would still leave it.
_PRINTER = """
import os
chunk = b"x" * (1 << 20)
try:
    for _ in range({mib}):
        os.write({fd}, chunk)
except BrokenPipeError:
    pass
os.write({fd}, b"THE-END\\n")
open("survived", "w").close()
"""


def test_a_step_printing_512_mib_is_killed_at_the_default_cap_and_the_host_stays_small(tmp_path: Path) -> None:
    report, staging = _step(tmp_path, _PRINTER.format(mib=512, fd=1))
    assert report["growth_kib"] < GROWTH_LIMIT_KIB, report  # it was over 1 GiB
    assert report["ok"] is False and report["code"] == BuildCode.STEP_OUTPUT_TOO_LARGE, report
    assert f"more than {MAX_STEP_OUTPUT} bytes" in report["detail"]
    assert not (staging / "work" / "survived").exists()  # killed, not merely cut off
    assert _logs(staging) == {"stdout": MAX_STEP_OUTPUT, "stderr": 0}  # the spill stops at the cap
    assert os.listdir(staging / "work") == []  # nothing of it where a step can write


def test_a_step_over_a_lower_cap_is_killed_at_once(tmp_path: Path) -> None:
    report, staging = _step(tmp_path, _PRINTER.format(mib=64, fd=2), cap=MIB)
    assert report["ok"] is False and report["code"] == BuildCode.STEP_OUTPUT_TOO_LARGE, report
    assert f"more than {MIB} bytes" in report["detail"]
    assert not (staging / "work" / "survived").exists()
    assert _logs(staging) == {"stdout": 0, "stderr": MIB}


def test_a_step_printing_320_mib_within_its_cap_succeeds_with_a_bounded_host(tmp_path: Path) -> None:
    report, staging = _step(tmp_path, _PRINTER.format(mib=320, fd=1), cap=1 << 30)
    assert report["ok"] is True, report
    assert report["growth_kib"] < GROWTH_LIMIT_KIB, report
    size = 320 * MIB + len(b"THE-END\n")
    assert report["stdout_size"] == size and report["stdout_len"] == STEP_OUTPUT_TAIL
    assert report["stdout_tail"].endswith("xxxTHE-END\n")  # the tail is the stream's last bytes
    assert report["stdout_log"].startswith(str(staging) + "/.step-output-") and _logs(staging)["stdout"] == size
    assert (staging / "work" / "survived").exists()


def test_a_failing_step_drowning_its_error_in_stderr_still_reports_the_error(tmp_path: Path) -> None:
    code = """
    import os, sys
    chunk = b"noise\\n" * 50000
    for _ in range(700):  # 200 MiB of noise
        os.write(2, chunk)
    os.write(2, b"the real reason the step failed\\n")
    sys.exit(3)
    """
    report, _ = _step(tmp_path, code, cap=1 << 30)
    assert report["ok"] is False and report["code"] == BuildCode.BUILD_STEP_FAILED, report
    assert report["detail"].startswith("build step exited with 3: ") and report["detail"].endswith("the real reason the step failed")
    assert report["growth_kib"] < GROWTH_LIMIT_KIB, report


def test_in_this_process_a_step_past_its_cap_fails_with_its_code(tmp_path: Path) -> None:
    """The same refusal raised in the test process itself (the others measure a child's memory)."""
    from attest.builder import Sandbox
    from attest.builder._sandbox import pick_step_uid
    from attest.errors import EnvironmentFailure

    staging = tmp_path / "stage-0123456789abcdef"
    staging.mkdir(mode=0o700)
    work = staging / "work"
    work.mkdir(mode=0o700)
    sandbox = Sandbox.establish(allow_unisolated_network=False)
    with pytest.raises(EnvironmentFailure) as ei:
        sandbox.run(["/usr/bin/python3", "-I", "-c", "import sys; sys.stdout.write('x' * (4 << 20))"], cwd=str(work), home=str(work),
                    staging=str(staging), writable=[str(work)], uid=pick_step_uid(), max_output=MIB)
    assert ei.value.code == BuildCode.STEP_OUTPUT_TOO_LARGE
