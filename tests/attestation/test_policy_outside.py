"""POLICY_IN_TREE cannot be dodged with a bind mount (security review).

``check_policy_outside`` used to decide from ``realpath`` alone. A bind mount is not a link:
``mount --bind TREE ELSEWHERE`` makes ``ELSEWHERE/policy.toml`` resolve to itself, outside the
tree, while it is the tree's own file. The real attacks run as root in a private mount namespace
(``unshare --mount``, so no mount outlives its test). Inside it, each check reports the old
realpath-only verdict next to the new one, so every case shows that the attack really got past
the old rule.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.keys import Keys
from test_tree import attest_tree

from attest.attestation import check_policy_outside, load_policy
from attest.attestation._tree import Mount, Placement, locate, parse_mountinfo, policy_source_inside
from attest.errors import InputError, VerificationError

ROOT = Path(__file__).parents[2]
UNSHARE = shutil.which("unshare", path="/usr/bin:/bin:/usr/sbin:/sbin")
MOUNT = shutil.which("mount", path="/usr/bin:/bin:/usr/sbin:/sbin")


def _namespaces_work() -> str | None:
    if os.geteuid() != 0:
        return "needs root to bind-mount"
    if UNSHARE is None or MOUNT is None:
        return "needs unshare(1) and mount(8)"
    done = subprocess.run([UNSHARE, "--mount", "--propagation", "private", "--", "true"], capture_output=True, check=False)
    return None if done.returncode == 0 else f"cannot create a mount namespace: {done.stderr.decode(errors='replace').strip()}"


needs_mounts = pytest.mark.skipif(_namespaces_work() is not None, reason=str(_namespaces_work()))

# Binds every (source, target) pair given as "$@" pairs, then execs the rest (after "--").
_BIND_THEN_EXEC = """set -eu
mount=$1; shift
while [ "$1" != "--" ]; do "$mount" --bind -- "$1" "$2"; shift 2; done
shift
exec "$@"
"""

# Inside the namespace: for each (policy, root), the old verdict (realpath alone) and the new one.
_CHECK = """
import json, os, sys
from attest.attestation import check_policy_outside, load_policy
from attest.attestation._tree import _inside
from attest.errors import AttestError
out = []
for policy, root in json.loads(sys.argv[1]):
    pol = load_policy(policy)
    old = "POLICY_IN_TREE" if any(_inside(s, os.path.realpath(root)) for s in pol.sources) else None
    try:
        check_policy_outside(pol, root)
        new = None
    except AttestError as e:
        new = e.code
    out.append([old, new])
print(json.dumps(out))
"""


def in_namespace(binds: list[tuple[Path, Path]], argv: list[str]) -> subprocess.CompletedProcess[str]:
    assert UNSHARE is not None and MOUNT is not None
    pairs = [str(p) for bind in binds for p in bind]
    return subprocess.run(
        [UNSHARE, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _BIND_THEN_EXEC, "bind", MOUNT, *pairs, "--", *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip


def verdicts(binds: list[tuple[Path, Path]], checks: list[tuple[Path, Path]]) -> list[tuple[str | None, str | None]]:
    """[(old realpath-only verdict, new verdict)] of each (policy, root) inside a namespace with ``binds``."""
    done = in_namespace(binds, [sys.executable, "-c", _CHECK, json.dumps([[str(p), str(r)] for p, r in checks])])
    assert done.returncode == 0, done.stderr
    return [(old, new) for old, new in json.loads(done.stdout)]


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    d = tmp_path / "elsewhere"
    d.mkdir()
    return d


@needs_mounts
def test_a_bind_mount_of_the_tree_does_not_let_its_policy_through(
    sample_tree: Path, elsewhere: Path, write_policy: Callable[..., Path]
) -> None:
    write_policy(["ed"], where=sample_tree / "lib" / "cfg")
    policy = elsewhere / "lib" / "cfg" / "policy.toml"  # the same file, through the bind mount
    assert verdicts([(sample_tree, elsewhere)], [(policy, sample_tree)]) == [(None, "POLICY_IN_TREE")]


@needs_mounts
def test_a_bind_mount_of_a_directory_inside_the_tree_does_not_either(
    sample_tree: Path, elsewhere: Path, write_policy: Callable[..., Path]
) -> None:
    """The mount's root is not the tree's root, so only the mount table shows where it lies."""
    write_policy(["ed"], where=sample_tree / "lib" / "cfg")
    nested = sample_tree / "lib" / "pkg"
    (nested / "deep").mkdir()
    write_policy(["ed"], where=nested / "deep")
    checks = [(elsewhere / "cfg" / "policy.toml", sample_tree), (elsewhere / "pkg" / "deep" / "policy.toml", sample_tree)]
    assert verdicts([(sample_tree / "lib", elsewhere)], checks) == [(None, "POLICY_IN_TREE")] * 2


@needs_mounts
def test_a_key_reached_through_a_bind_mount_of_the_tree_is_refused(
    sample_tree: Path, elsewhere: Path, tmp_path: Path, keys: Keys
) -> None:
    shutil.copy(keys.pub("ed"), sample_tree / "k.pub.pem")
    policy = tmp_path / "outside.toml"
    policy.write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{elsewhere / "k.pub.pem"}"\n')
    assert verdicts([(sample_tree, elsewhere)], [(policy, sample_tree)]) == [(None, "POLICY_IN_TREE")]


@needs_mounts
def test_a_tree_named_through_its_bind_mount_still_contains_its_policy(
    sample_tree: Path, elsewhere: Path, write_policy: Callable[..., Path]
) -> None:
    policy = write_policy(["ed"], where=sample_tree / "lib" / "cfg")
    assert verdicts([(sample_tree, elsewhere)], [(policy, elsewhere)]) == [(None, "POLICY_IN_TREE")]


@needs_mounts
def test_bind_mounts_of_other_directories_are_still_outside(
    sample_tree: Path, elsewhere: Path, tmp_path: Path, write_policy: Callable[..., Path]
) -> None:
    outside = write_policy(["ed"], where=tmp_path / "trust")
    sibling = write_policy(["ed"], where=sample_tree.parent / (sample_tree.name + "-policy"))
    other = tmp_path / "other"
    other.mkdir()
    binds = [(outside.parent, elsewhere), (sibling.parent, other)]
    checks = [(elsewhere / "policy.toml", sample_tree), (other / "policy.toml", sample_tree), (outside, sample_tree)]
    assert verdicts(binds, checks) == [(None, None)] * 3


@needs_mounts
def test_verify_and_freeze_refuse_a_policy_through_a_bind_mount_end_to_end(
    sample_tree: Path, elsewhere: Path, tmp_path: Path, keys: Keys, write_policy: Callable[..., Path]
) -> None:
    write_policy(["ed"], where=sample_tree / "lib" / "cfg")  # planted in the tree, and attested with it
    att = attest_tree(sample_tree, tmp_path / "att.json", keys)
    # The attestation verifies under a policy from outside: the bind mount is the only thing that
    # would let the planted copy stand in for it.
    good = write_policy(["ed"], where=tmp_path / "trust")
    ok = in_namespace([], [sys.executable, "-m", "attest", "verify", str(sample_tree), "--attestation", str(att), "--policy", str(good), "--json"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    policy = elsewhere / "lib" / "cfg" / "policy.toml"
    for argv in (
        ["verify", str(sample_tree), "--attestation", str(att), "--policy", str(policy), "--json"],
        ["freeze", str(sample_tree), "--attestation", str(att), "--policy", str(policy), "--state-dir", str(tmp_path / "state"), "--json"],
    ):
        done = in_namespace([(sample_tree, elsewhere)], [sys.executable, "-m", "attest", *argv])
        assert done.returncode == 1, done.stdout + done.stderr
        assert [e["code"] for e in json.loads(done.stdout)["errors"]] == ["POLICY_IN_TREE"]
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("record.json"))


def test_a_policy_input_that_vanished_cannot_be_judged_outside(sample_tree: Path, tmp_path: Path, keys: Keys) -> None:
    key = tmp_path / "k.pub.pem"
    shutil.copy(keys.pub("ed"), key)
    policy = tmp_path / "p.toml"
    policy.write_text(f'threshold = 1\n[[signers]]\nkind = "key"\npublic_key = "{key}"\n')
    pol = load_policy(policy)
    key.unlink()
    with pytest.raises(InputError) as err:
        check_policy_outside(pol, sample_tree)
    assert err.value.code == "UNREADABLE" and err.value.path == str(key)


def test_a_plain_policy_inside_the_tree_is_still_refused_by_path(sample_tree: Path, write_policy: Callable[..., Path]) -> None:
    with pytest.raises(VerificationError) as err:
        check_policy_outside(load_policy(write_policy(["ed"], where=sample_tree / "cfg")), sample_tree)
    assert err.value.code == "POLICY_IN_TREE" and "resolves inside the tree" in err.value.detail


# --- The decision, table-tested (pure) ---------------------------------------------------------

ROOT_ID = (64768, 1000)
TREE = Placement("/srv/tree", (ROOT_ID,), ("254:0", "/srv/tree"))


@pytest.mark.parametrize(
    ("source", "root", "inside"),
    [
        # (a) by path
        (Placement("/srv/tree/p.toml", ((1, 2), ROOT_ID), ("254:0", "/srv/tree/p.toml")), TREE, True),
        (Placement("/srv/tree", (ROOT_ID,), None), TREE, True),
        (Placement("/srv/tree-policy/p.toml", ((1, 2), (1, 3)), ("254:0", "/srv/tree-policy/p.toml")), TREE, False),
        # (b) an ancestor is the root directory: bind mount of the whole tree, or a second path
        (Placement("/mnt/x/cfg/p.toml", ((1, 2), (1, 3), ROOT_ID, (1, 4), (1, 5)), None), TREE, True),
        (Placement("/mnt/x/p.toml", ((1, 2), (64768, 1001), (1, 5)), None), TREE, False),  # same device, other inode
        (Placement("/mnt/x/p.toml", ((1, 2), (64769, 1000), (1, 5)), None), TREE, False),  # same inode, other device
        (Placement("/mnt/x/p.toml", ((1, 2), ROOT_ID), None), Placement("/srv/tree", (), None), False),  # root unknown
        # (c) the mount table: bind mount of a directory inside the tree
        (Placement("/mnt/x/p.toml", ((1, 2), (1, 3)), ("254:0", "/srv/tree/lib/p.toml")), TREE, True),
        (Placement("/mnt/x/p.toml", ((1, 2), (1, 3)), ("254:1", "/srv/tree/lib/p.toml")), TREE, False),  # another filesystem
        (Placement("/mnt/x/p.toml", ((1, 2), (1, 3)), ("254:0", "/srv/tree-x/p.toml")), TREE, False),
        (Placement("/mnt/x/p.toml", ((1, 2), (1, 3)), None), TREE, False),  # no mount table
        (Placement("/mnt/x/p.toml", ((1, 2), (1, 3)), ("254:0", "/srv/tree/p.toml")), Placement("/srv/tree", (ROOT_ID,), None), False),
        # a tree named through a bind mount, the policy by its real path
        (Placement("/srv/tree/p.toml", ((1, 2), ROOT_ID), ("254:0", "/srv/tree/p.toml")), Placement("/mnt/t", (ROOT_ID,), ("254:0", "/srv/tree")), True),
    ],
)
def test_policy_source_inside(source: Placement, root: Placement, inside: bool) -> None:
    assert (policy_source_inside(source, root) is not None) == inside


MOUNTINFO = (
    b"22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    b"27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
    b"30 27 0:30 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw\n"
    b"106 27 254:0 /srv/tree /mnt/whole rw,relatime - ext4 /dev/vda rw\n"
    b"107 27 254:0 /srv/tree/lib /mnt/part rw,relatime master:1 shared:2 - ext4 /dev/vda rw\n"
    b"108 27 0:30 /a /mnt/part rw,relatime - tmpfs tmpfs rw\n"  # mounted on top of 107
    b"109 27 254:0 /srv/with\\040space /mnt/sp\\134ace rw - ext4 /dev/vda rw\n"
)


def test_parse_mountinfo_unescapes_paths_and_skips_optional_fields() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert mounts[3] == Mount("254:0", "/srv/tree", "/mnt/whole")
    assert mounts[4] == Mount("254:0", "/srv/tree/lib", "/mnt/part")
    assert mounts[6] == Mount("254:0", "/srv/with space", "/mnt/sp\\ace")
    with pytest.raises(InputError) as err:
        parse_mountinfo(b"27 1 254:0 / /\n")
    assert err.value.code == "UNREADABLE"


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ("/srv/tree/p.toml", ("254:0", "/srv/tree/p.toml")),
        ("/mnt/whole/cfg/p.toml", ("254:0", "/srv/tree/cfg/p.toml")),
        ("/mnt/whole", ("254:0", "/srv/tree")),
        ("/mnt/wholesale/p", ("254:0", "/mnt/wholesale/p")),  # a common prefix is not a mount point
        ("/mnt/part/p.toml", ("0:30", "/a/p.toml")),  # the mount on top wins
        ("/tmp/x", ("0:30", "/x")),
        ("/proc/self", ("0:21", "/self")),
        ("/mnt/sp\\ace/f", ("254:0", "/srv/with space/f")),
    ],
)
def test_locate(path: str, where: tuple[str, str]) -> None:
    assert locate(path, parse_mountinfo(MOUNTINFO)) == where


def test_locate_without_a_mount_holding_the_path() -> None:
    assert locate("/x", parse_mountinfo(b"30 27 0:30 / /tmp rw - tmpfs tmpfs rw\n")) is None
