"""Running the review step from the four frozen images of a verified handoff (docs/review.md "`attest review exec`").

1. The handoff verifies under TRUST (:func:`~attest.review.handoff.verify_handoff`).
2. Each of the four images is taken from the store and verified (seal, every byte, seal) by
   :func:`attest.freeze.run_from_images`, under the store's shared lock; then, before anything
   runs, each must be the handoff's image exactly: identity, store path and backend, and the
   procedure bundle's files exactly the handoff's (:func:`decide_images`, pure).
3. The reviewer runs with ``attest exec``'s clean environment: ``ATTEST_IMAGE_BOOTSTRAP``,
   ``ATTEST_IMAGE_RUNTIME``, ``ATTEST_IMAGE_BASE`` and ``ATTEST_IMAGE_PROCEDURE``, working
   directory the base snapshot, **confined** (:func:`confine_reviewer`) as a build step is: new
   mount, PID, IPC, UTS and (unless ``network``) network namespaces, a uid no account or
   process has (rootless: the caller's, in a user namespace mapping only it), no capabilities,
   no_new_privs, and a root holding only the system programs and libraries (never the host's
   ``/etc``), an ``/etc`` of its own (:func:`reviewer_etc`: accounts naming its ids, hosts,
   nsswitch.conf, copies of the loader cache and the CA bundle, resolv.conf with ``network``),
   ``readonly``, the private run
   directories and the four images, each bound from the descriptor of the directory that was
   verified (so a path swapped afterwards is never what the reviewer reads). Every process it
   starts dies with it. It holds nothing of the caller's session: a new session (no controlling
   terminal), stdin ``/dev/null``, its stderr relayed through a pipe, a new, empty session
   keyring and the keyring system calls refused (:mod:`attest._session`). After the handoff
   the procedure bundle is the only source of Skill bytes: the installed Skill, the worktree,
   the head, the deployment's keys and state, the caller's home are not in its root. The record (:class:`Confinement`) lists exactly what was
   bound, and which bound path reaches a sensitive host path (a ``readonly`` the caller chose).
4. Its standard output must be the provider-neutral result (:func:`parse_result`); it is written
   atomically to the result file only when it parses, and every image is re-checked after the
   command (a change while it ran fails closed, whatever it printed).

    >>> run = run_review_step("handoff.json", load_policy("trust.toml"), "/var/lib/attest",
    ...                       ["/bin/sh", "-c", 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in'], out="result.json")
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..._digest import sha256_of
from ..._fdio import write_all
from ..._fs import write_atomic
from ..._json import canonical_bytes
from ..._safefs import O_DIR, O_FILE
from ..._session import keyring_statement
from ...errors import EnvironmentFailure, Finding, InputError, VerificationError
from ._codes import HandoffCode
from ._handoff import IMAGE_NAMES, Handoff, verify_handoff
from ._result import MAX_RESULT_BYTES, ReviewResult, parse_result

if TYPE_CHECKING:
    from ...attestation import Policy
    from ...freeze import Image
    from ...freeze._exec import Confine


def decide_images(handoff: Handoff, images: Mapping[str, Image]) -> list[Finding]:
    """Whether the verified store images are exactly the handoff's (pure: identity, path, backend, bundle files).

    Raises:
        Nothing: every difference is a returned ``HANDOFF_IMAGE_MISMATCH`` finding.
    """
    found: list[Finding] = []
    for name in IMAGE_NAMES:
        want, got = handoff.images[name], images.get(name.upper())
        if got is None:
            found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, None, f"the {name} image was not resolved"))
            continue
        for field in ("identity", "path", "backend"):
            if getattr(got, field) != getattr(want, field):
                found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, got.path,
                                     f"the {name} image's {field} is {getattr(got, field)!r}, the handoff's {getattr(want, field)!r}"))
    bundle = images.get("PROCEDURE")
    inventory = getattr(bundle, "inventory", None)
    if bundle is not None and inventory is not None:
        files = tuple(sorted((e.path, e.sha256) for e in inventory.entries if e.sha256 is not None))
        if files != handoff.procedure_files:
            found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, bundle.path,
                                 "the procedure bundle's files are not exactly the handoff's procedure files"))
    elif bundle is not None:
        found.append(Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, bundle.path, "the procedure bundle has no inventory to compare"))
    return found


@dataclass(frozen=True, slots=True)
class EtcFile:
    """One file of the reviewer's synthesized ``/etc``: where, whence (``synthesized`` or the host file copied), its digest.

    Raises:
        Nothing.
    """

    path: str
    source: str
    sha256: str
    holds: str = ""

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {"path": self.path, "from": self.source, "sha256": self.sha256}
        if self.holds:
            doc["holds"] = self.holds
        return doc


@dataclass(frozen=True, slots=True)
class Confinement:
    """How the reviewer ran: the confinement established (mode, ids, network, exactly what its root holds), or unconfined.

    ``readonly``: exactly the host paths bound read-only (the system paths without ``/etc``, the
    ``--readonly`` paths, resolved and de-nested; the runtime image carries its own interpreter); ``images`` and
    ``writable``: the images bound from their verified descriptors and the run directories.
    ``etc``: the files of its synthesized ``/etc`` (``etc_omitted``: those it could not be given,
    and why). ``exposes``: each bound path (other than the system paths) that is, holds or lies
    under a sensitive host path (``/etc``, ``/home``, ``/root``, ``/var``, ``/run``, ``/tmp``,
    the caller's home, the state directory): a caller's explicit choice, recorded, never silent.
    ``session`` (:data:`SESSION`): no controlling terminal, no descriptor of the caller's
    terminal or log file; ``keyring``: a new, empty session keyring with the keyring system
    calls refused (or none to have, where keyctl fails here).

    Raises:
        Nothing.
    """

    confined: bool
    network: str  # "none" (its own empty network namespace), "loopback" (the same, its lo up) or "host"
    uid: int | None = None
    readonly: tuple[str, ...] = ()
    mode: str = "rootful"  # "rootful": a uid no account or process has; "rootless": the caller's uid in a user namespace
    gid: int | None = None
    etc: tuple[EtcFile, ...] = ()
    etc_omitted: tuple[tuple[str, str], ...] = ()
    images: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    exposes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    keyring: str = ""  # what it had of keyrings (attest._session.keyring_statement); "" before that was recorded
    noexec: tuple[str, ...] = ()  # the images bound noexec as well as read-only (the change: review data, never a program)

    def to_json(self) -> dict[str, object]:
        if not self.confined:
            return {"confined": False, "why": "--unsafe-unconfined: the reviewer ran as the caller, seeing the host"}
        host_etc = [p for p in self.readonly if p == ETC or p.startswith(ETC + "/")]
        etc: dict[str, object] = {
            "source": "host" if ETC in host_etc else "synthesized",
            "files": [f.to_json() for f in self.etc],
            "omitted": [{"path": p, "why": why} for p, why in self.etc_omitted],
            "host_paths": host_etc,
        }
        doc: dict[str, object] = {
            "confined": True, "mode": self.mode, "network": self.network, "uid": self.uid, "gid": self.gid,
            "namespaces": [*(["user"] if self.mode == "rootless" else []), "mount", "pid", "ipc", "uts",
                           *(["net"] if self.network != "host" else [])],
            "capabilities": "none, no_new_privs",
            "readonly": list(self.readonly), "images": list(self.images), "noexec": list(self.noexec), "writable": list(self.writable),
            "etc": etc,
            "tmpfs": ["/tmp", "/var/tmp", "/run", "/dev/shm"], "dev": ["null", "zero", "full", "random", "urandom"],
            "proc": "new, of its own PID namespace",
            "session": SESSION,
            "keyring": self.keyring,
            "exposes": [{"path": p, "reaches": list(r)} for p, r in self.exposes],
        }
        if self.mode == "rootless":
            doc["uid_note"] = "the caller's own uid, mapped into the user namespace: processes of that uid outside can see it"
        return doc


#: What the confined reviewer holds of its caller's session (attest.freeze.run_from_images with ``confine``).
SESSION = "new session, no controlling terminal; stdin /dev/null; stderr relayed through a pipe (controls neutralized on a terminal)"
#: The reviewer's /etc: nothing of the host's but these files (each a regular file of root's alone,
#: reached only through root's directories), copied, and the accounts, hosts and name service it needs.
ETC = "/etc"
LOADER_CACHE = "/etc/ld.so.cache"
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem")
RESOLV_CONF = "/etc/resolv.conf"
MAX_ETC_FILE = 16 << 20
OVERFLOW_ID = 65534  # how ids a user namespace does not map appear (kernel.overflowuid), and nobody's
#: Host paths whose binding into the reviewer's root the record always points out (besides the caller's home and the state).
SENSITIVE_ROOTS = ("/etc", "/home", "/root", "/var", "/run", "/tmp", "/dev", "/proc", "/sys")


def read_host_file(path: str, *, max_bytes: int = MAX_ETC_FILE) -> tuple[bytes, str]:
    """The bytes of the host's file ``path`` and the path it resolved to, if only root could have put it there.

    Resolved one component at a time through directory descriptors: every directory on the way
    (through any link) is root's and not writable by group or others, so no link on it was
    planted by anyone but root; the file itself is a regular file of root's, not writable by
    group or others, at most ``max_bytes``.

    Raises:
        ValueError: why not (absent, a link too many, a directory or file that is not root's alone, too large).
    """

    def trusted(st: os.stat_result, what: str) -> None:
        if st.st_uid != 0 or st.st_mode & 0o022:
            raise ValueError(f"{what} is not root's alone (uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})")

    if not os.path.isabs(path):
        raise ValueError("not an absolute path")
    parts = path.split("/")[1:]
    stack: list[int] = []
    names: list[str] = []
    links = 0
    try:
        stack.append(os.open("/", O_DIR))
        while parts:
            name = parts.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    names.pop()
                continue
            here = "/" + "/".join(names)
            trusted(os.fstat(stack[-1]), f"the directory {here}")
            st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > 16:
                    raise ValueError("more than 16 links")
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names = []
                parts = target.split("/") + parts
                continue
            if any(p not in ("", ".") for p in parts):
                stack.append(os.open(name, O_DIR, dir_fd=stack[-1]))
                names.append(name)
                continue
            fd = os.open(name, O_FILE, dir_fd=stack[-1])
            try:
                got = os.fstat(fd)
                if not stat.S_ISREG(got.st_mode) or (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino):
                    raise ValueError("not a regular file")
                trusted(got, "the file")
                if got.st_size > max_bytes:
                    raise ValueError(f"{got.st_size} bytes: more than {max_bytes} bytes")
                chunks: list[bytes] = []
                total = 0
                while total <= max_bytes:
                    chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    total += len(chunk)
                if total > max_bytes:
                    raise ValueError(f"more than {max_bytes} bytes")
                return b"".join(chunks), "/" + "/".join([*names, name])
            finally:
                os.close(fd)
        raise ValueError("not a file")
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from e
    finally:
        for fd in stack:
            os.close(fd)


def reviewer_etc(*, uid: int, gid: int, home: str, network: bool,
                 read: Callable[[str], tuple[bytes, str]] = read_host_file) -> tuple[list[tuple[EtcFile, bytes]], list[tuple[str, str]]]:
    """The files of the reviewer's ``/etc`` and their bytes, and those it cannot be given (with why).

    Synthesized: ``passwd`` and ``group`` naming root, the reviewer's ``uid``/``gid`` (home
    ``home``) and the overflow id, ``hosts`` (localhost only), ``nsswitch.conf`` (files; dns only
    with ``network``). Copied from the host through ``read`` (:func:`read_host_file`): the loader
    cache, the first CA bundle of :data:`CA_BUNDLES` there is, and ``resolv.conf`` only with
    ``network``. Nothing else of the host's ``/etc``.

    Raises:
        Nothing: a host file that cannot be read safely is returned in the second list.
    """
    if any(c in home for c in ":\n") or not os.path.isabs(home):
        home = "/nonexistent"
    users = [("root", 0, 0, "root", "/nonexistent"), ("reviewer", uid, gid, "attest reviewer", home)]
    groups = [("root", 0), ("reviewer", gid)]
    if uid != OVERFLOW_ID:
        users.append(("nobody", OVERFLOW_ID, OVERFLOW_ID, "ids not mapped here", "/nonexistent"))
    if gid != OVERFLOW_ID:
        groups.append(("nogroup", OVERFLOW_ID))
    passwd = "".join(f"{n}:x:{u}:{g}:{gecos}:{h}:/usr/sbin/nologin\n" for n, u, g, gecos, h in users)
    group = "".join(f"{n}:x:{g}:\n" for n, g in groups)
    hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    nss = f"passwd: files\ngroup: files\nshadow: files\nhosts: files{' dns' if network else ''}\n"
    made = [
        ("/etc/passwd", passwd, ", ".join(f"{n} ({u}:{g})" for n, u, g, _, _ in users)),
        ("/etc/group", group, ", ".join(f"{n} ({g})" for n, g in groups)),
        ("/etc/hosts", hosts, "localhost (127.0.0.1, ::1)"),
        ("/etc/nsswitch.conf", nss, "files" + (", dns for hosts" if network else "")),
    ]
    files: list[tuple[EtcFile, bytes]] = []
    for path, text, holds in made:
        data = text.encode()
        files.append((EtcFile(path, "synthesized", sha256_of(data), holds), data))
    omitted: list[tuple[str, str]] = []

    def copy(path: str, holds: str) -> bool:
        try:
            data, source = read(path)
        except ValueError as e:
            omitted.append((path, f"the host's {path}: {e}"))
            return False
        files.append((EtcFile(path, source, sha256_of(data), holds), data))
        return True

    copy(LOADER_CACHE, "the loader cache")
    tried: list[tuple[str, str]] = []
    for bundle in CA_BUNDLES:
        before = len(omitted)
        if copy(bundle, "CA certificates"):
            break
        tried.append(omitted.pop(before))
    else:
        omitted.append(("CA certificates", "; ".join(why for _, why in tried)))
    if network:
        copy(RESOLV_CONF, "the resolver configuration (--network)")
    return files, omitted


def _sealed_memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(f"attest-etc{name.replace('/', '-')}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        write_all(fd, data)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def decide_exposure(roots: Sequence[str], sensitive: Sequence[tuple[str, str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Which of ``roots`` (bound read-only) reach a ``(path, what)`` of ``sensitive``: it, something under it, or above it (pure).

    Raises:
        Nothing: ``((root, (what, ...)), ...)`` for each root that reaches any, in the order of ``roots``.
    """
    def within(a: str, b: str) -> bool:
        return a == b or a.startswith(b.rstrip("/") + "/")

    out: list[tuple[str, tuple[str, ...]]] = []
    for root in roots:
        reaches = tuple(dict.fromkeys(what for path, what in sensitive if within(root, path) or within(path, root)))
        if reaches:
            out.append((root, reaches))
    return tuple(out)


def _sensitive(state_dir: str) -> list[tuple[str, str]]:
    out = [(p, f"the host's {p}") for p in SENSITIVE_ROOTS]
    homes = [os.environ.get("HOME", "")]
    try:
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass
    for h in homes:
        if h and os.path.isabs(h) and os.path.realpath(h) != "/":
            out.append((os.path.realpath(h), f"the caller's home {os.path.realpath(h)}"))
    out.append((os.path.realpath(state_dir), f"the state directory {os.path.realpath(state_dir)}"))
    return out


def verify_can_confine(euid: int, *, unsafe_unconfined: bool, rootless: Callable[[], str | None] | None = None) -> None:
    """Raise unless the reviewer can be confined by a process of ``euid``, or the caller asked for no confinement.

    Root confines it rootful (a uid of its own); anyone else rootless (a user namespace mapping
    only the caller, :func:`confine_reviewer`), where ``rootless()`` returns None; otherwise it
    returns why not. Its default, :func:`attest.builder._sandbox.rootless_problem`, asks this
    machine, and is called only for a non-root caller who did not pass ``unsafe_unconfined``;
    given, the decision is pure.

    Raises:
        EnvironmentFailure: ``REVIEWER_NOT_CONFINED`` for a non-root caller without ``unsafe_unconfined``
            where no rootless confinement can be made (no unprivileged user namespaces).
    """
    if euid == 0 or unsafe_unconfined:
        return
    # lazy: attest.builder, +137 ms to the confined reviewer's start-up (review agent imports review.handoff for the result's parser)
    from ...builder._sandbox import rootless_problem

    problem = (rootless or rootless_problem)()
    if problem is not None:
        raise EnvironmentFailure(HandoffCode.REVIEWER_NOT_CONFINED, "the reviewer cannot be confined here: without root "
                                 f"that needs a user namespace, and {problem}; pass --unsafe-unconfined to run it as you, "
                                 "seeing the host")


_RUN_SUBDIRS = ("home", "tmp", "cache", "config", "data", "pycache")
#: Images that are review data, never programs: bound ``noexec`` as well as read-only.
NOEXEC_IMAGES = frozenset({"CHANGE"})


def confine_reviewer(readonly: Sequence[str], *, network: bool, record: list[Confinement] | None = None,
                     state_dir: str | None = None) -> tuple[Confine, list[int]]:
    """A ``confine`` callback for :func:`attest.freeze.run_from_images` and a list that receives the uid it picked.

    The reviewer's root holds the system paths without the host's ``/etc``
    (:func:`attest.builder._sandbox.confined_roots`), ``readonly``, the run directories and the
    images, and an ``/etc`` of its own (:func:`reviewer_etc`): files written by the host into
    sealed memfds and copied by the confinement into the new root's tmpfs, read-only to the
    reviewer; the host's ``/etc``, ``/home``, ``/root``, ``/var``, ``/run``, ``/tmp`` and the
    state directory are not in it unless ``readonly`` names them (then ``exposes`` says so).
    Each image is opened (``O_NOFOLLOW|O_DIRECTORY``) and must be the verified, sealed root (same
    device and inode as sealed) before its descriptor is bound read-only at its path. Root
    confines rootful: a uid of the reviewer's own (:func:`attest.builder.pick_step_uid`), which
    the run directories are handed to. Anyone else confines rootless: the same root and
    namespaces inside a new user namespace that maps only the caller, so the reviewer runs as
    the caller (the uid recorded), who already owns the run directories; the images stay
    read-only to it because they are bound read-only, whoever owns them. ``record`` receives
    the :class:`Confinement` each call establishes (``state_dir``, default the run directory's
    grandparent, is one of the paths its ``exposes`` watches for).

    Raises:
        Nothing itself. The callback raises ``VerificationError`` (``HANDOFF_IMAGE_MISMATCH``: an
        image path no longer leads to the sealed root), ``EnvironmentFailure``
        (``NETWORK_NOT_ISOLATED``: no free uid, or the confinement tools are missing), and
        ``OSError`` only from handing the run directories to the reviewer's uid.
    """
    # lazy: attest.builder, +137 ms to the confined reviewer's start-up (review agent imports review.handoff for the result's parser)
    from ...builder import confine_argv, give_to_uid, pick_step_uid
    from ...builder._sandbox import SYSTEM_PATHS, confined_roots, loopback_tool  # lazy: as above

    picked: list[int] = []

    def confine(argv: Sequence[str], images: Mapping[str, Image], run_dir: str, cwd: str) -> tuple[list[str], list[int]]:
        rootless = os.geteuid() != 0
        uid = os.getuid() if rootless else pick_step_uid()
        gid = os.getgid() if rootless else uid  # rootful: setpriv --regid with the uid's number
        picked.append(uid)
        writable = [f"{run_dir}/{sub}" for sub in _RUN_SUBDIRS]
        if not rootless:
            give_to_uid(writable, uid)
        fds: list[int] = []
        try:
            binds: list[tuple[int, str]] = []
            noexec: list[tuple[int, str]] = []
            for name, image in images.items():
                try:
                    fd = os.open(image.path, O_DIR)
                except OSError as e:  # swapped for a link, removed: never a traceback, never a bind of something else
                    raise VerificationError(HandoffCode.HANDOFF_IMAGE_MISMATCH, f"the {name.lower()} image cannot be opened "
                                            f"for binding: {e.strerror}", image.path) from e
                fds.append(fd)
                st = os.fstat(fd)
                root = next((e for e in image.sealed if e.path == ""), None)
                if root is None or st.st_ino != root.ino or st.st_dev != image.dev:
                    raise VerificationError(HandoffCode.HANDOFF_IMAGE_MISMATCH, f"the {name.lower()} image's path no longer leads to "
                                            "the directory that was verified", image.path)
                (noexec if name in NOEXEC_IMAGES else binds).append((fd, image.path))
            files, omitted = reviewer_etc(uid=uid, gid=gid, home=f"{run_dir}/home", network=network)
            etc: list[tuple[int, str]] = []
            for entry, data in files:
                fds.append(_sealed_memfd(entry.path, data))
                etc.append((fds[-1], entry.path))
            roots = confined_roots(readonly, host_etc=False)
            loopback = not network and loopback_tool() is not None
            command = confine_argv(argv, root_parent=run_dir, cwd=cwd, readonly=roots, writable=writable, uid=uid,
                                   network=network, fd_binds=binds, rootless=rootless, etc=etc, fd_binds_noexec=noexec,
                                   loopback=loopback)
            if record is not None:
                state = state_dir if state_dir is not None else os.path.dirname(os.path.dirname(run_dir))
                system = set(SYSTEM_PATHS) - {ETC}
                exposes = decide_exposure([r for r in roots if r not in system], _sensitive(state))
                record.append(Confinement(True, "host" if network else "loopback" if loopback else "none", uid, roots, "rootless" if rootless else "rootful",
                                          gid, tuple(e for e, _ in files), tuple(omitted), tuple(t for _, t in [*binds, *noexec]),
                                          tuple(writable), exposes, keyring_statement(deny=True), tuple(t for _, t in noexec)))
            return command, fds
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    return confine, picked


@dataclass(frozen=True, slots=True)
class ReviewRun:
    """What :func:`run_review_step` did: the handoff, the parsed result and where it was written.

    Raises:
        Nothing.
    """

    handoff: Handoff
    result: ReviewResult
    result_path: str
    result_digest: str
    confinement: Confinement

    def to_json(self) -> dict[str, object]:
        return {"ok": True, "handoff_digest": self.handoff.attestation_digest, "result": self.result_path,
                "result_digest": self.result_digest, "complete": self.result.complete, "confinement": self.confinement.to_json(),
                "findings": len(self.result.findings), "blocking": sum(f.blocking for f in self.result.findings),
                "images": {n: i.identity for n, i in self.handoff.images.items()}}


@dataclass(frozen=True, slots=True)
class ReviewerImage:
    """The deployment's reviewer program: a frozen image whose attestation verified under TRUST.

    Raises:
        Nothing.
    """

    identity: str
    attestation: str
    attestation_digest: str

    def to_json(self) -> dict[str, str]:
        return {"identity": self.identity, "attestation": self.attestation, "attestation_digest": self.attestation_digest}


def verify_reviewer_image(identity: str, attestation: str | os.PathLike[str] | None, policy: Policy) -> ReviewerImage:
    """Verify ``attestation`` under ``policy``: a closed-tree attestation of exactly the image ``identity``.

    The store image itself is verified (seal, every byte, seal) when the run takes it; this is
    what makes it the deployment's: an inventory a trusted signer attested, whose identity is
    the one asked for.

    Raises:
        VerificationError: ``REVIEWER_IMAGE_MISMATCH`` (no attestation, or one of another tree),
            and the attestation layer's codes (``NO_TRUSTED_SIGNATURE``, ``SIGNER_NOT_FOR_PREDICATE``, ...).
        InputError: an unreadable or malformed attestation, ``POLICY_IN_TREE``.
    """
    # lazy: attest.attestation, +33 ms to the confined reviewer's start-up (review agent imports review.handoff for the result's parser)
    from ...attestation import closed_tree_inventory, verify_attestation_file

    if attestation is None:
        raise VerificationError(HandoffCode.REVIEWER_IMAGE_MISMATCH, "--reviewer needs --reviewer-attestation: the "
                                "deployment's signed closed-tree attestation of the reviewer image", identity)
    where = os.path.abspath(os.fspath(attestation))
    verified = verify_attestation_file(where, policy)
    attested = closed_tree_inventory(verified).identity
    if attested != identity:
        raise VerificationError(HandoffCode.REVIEWER_IMAGE_MISMATCH, f"the reviewer attestation names the image {attested}, "
                                f"not {identity}", where)
    return ReviewerImage(identity, where, verified.attestation_digest)


def reviewer_command(argv: Sequence[str], reviewer_path: str | None) -> list[str]:
    """``argv`` with a relative program (``bin/review``) resolved in the reviewer image at ``reviewer_path``.

    An absolute path and a ``$ATTEST_IMAGE_<NAME>/...`` reference stay as they are; a bare name
    (``sh``) is a program of the run's fixed PATH and must be there; a relative path with a ``/``
    names a program of the reviewer image.

    Raises:
        InputError: ``BAD_EXEC_ENV`` for a bare name not on the PATH, a relative path without a
            reviewer image, or one that leaves it.
    """
    # lazy: attest.freeze, +87 ms to the confined reviewer's start-up (review agent imports review.handoff for the result's parser)
    from ...freeze import FreezeCode
    from ...freeze._exec import _IMAGE_REF, DEFAULT_PATH  # lazy: as above

    if not argv:
        raise InputError(FreezeCode.BAD_EXEC_ENV, "no command to run")

    program = argv[0]
    if os.path.isabs(program) or _IMAGE_REF.match(program):
        return list(argv)
    if program.startswith("$"):
        raise InputError(FreezeCode.BAD_EXEC_ENV, f"{program!r}: no shell expands it; a program is an absolute path, "
                         "$ATTEST_IMAGE_<NAME>/..., or (with --reviewer) a path inside the reviewer image")
    if "/" not in program:  # a bare name (sh, python3): found on the run's fixed PATH, as exec finds it
        if shutil.which(program, path=DEFAULT_PATH) is None:
            raise InputError(FreezeCode.BAD_EXEC_ENV, f"{program!r} is not a program on the reviewer's PATH ({DEFAULT_PATH}); "
                             "name one of the reviewer image by its path inside it (bin/review) or give an absolute path")
        return list(argv)
    if reviewer_path is None:
        raise InputError(FreezeCode.BAD_EXEC_ENV, f"{program!r} is a relative program: it names a program of the reviewer "
                         "image, and no --reviewer was given (or give an absolute path)")
    rel = program.removeprefix("./")
    if any(part in ("", ".", "..") for part in rel.split("/")):
        raise InputError(FreezeCode.BAD_EXEC_ENV, f"{program!r} is not a plain path inside the reviewer image")
    return [f"{reviewer_path}/{rel}", *argv[1:]]


def run_review_step(
    handoff_path: str | os.PathLike[str],
    policy: Policy,
    state_dir: str | os.PathLike[str],
    argv: Sequence[str],
    *,
    out: str | os.PathLike[str],
    pass_env: Sequence[str] = (),
    set_env: Mapping[str, str] | None = None,
    readonly: Sequence[str] = (),
    network: bool = False,
    unsafe_unconfined: bool = False,
    more_images: Mapping[str, str | Image] | None = None,
    require_more: Callable[[Mapping[str, Image]], list[Finding]] | None = None,
    attest_env: Mapping[str, str] | None = None,
    _verified: Mapping[str, Image] | None = None,
) -> ReviewRun:
    """Verify the handoff, run ``argv`` from its four frozen images, write the parsed result to ``out``.

    ``more_images``: further images by name (``CHANGE``, ``REVIEWER``: identities, or images the
    caller took from this store for this run), verified as the four are; ``require_more`` is
    asked, with every verified image, what is wrong with them (before anything runs).

    Raises:
        InputError: unreadable handoff, bad command or environment (``BAD_EXEC_ENV``,
            ``ENV_REFUSED``), an unwritable ``out`` (``BAD_OUTPUT_PATH``).
        VerificationError: the handoff does not verify (``HANDOFF_*``, the attestation codes), an
            image is missing or changed (``NOT_IN_STORE``, ``IMAGE_*``, ``HANDOFF_IMAGE_MISMATCH``,
            ``IMAGE_CHANGED_DURING_EXEC``), or the output is not a result (``REVIEW_RESULT_INVALID``).
        EnvironmentFailure: the reviewer exited non-zero (``REVIEWER_FAILED``); it cannot be
            confined here (``REVIEWER_NOT_CONFINED``) and ``unsafe_unconfined`` was not given.
    """
    # lazy: attest.freeze, +87 ms to the confined reviewer's start-up (review agent imports review.handoff for the result's parser)
    from ...freeze import run_from_images

    handoff = verify_handoff(handoff_path, policy)  # (1)
    state = os.path.abspath(os.fspath(state_dir))
    confine: Confine | None = None
    established: list[Confinement] = []
    verify_can_confine(os.geteuid(), unsafe_unconfined=unsafe_unconfined)
    if not unsafe_unconfined:
        # The system paths (without the host's /etc) are always there: confine_reviewer adds them. The
        # runtime image carries its whole interpreter, so nothing of a host Python prefix is bound.
        roots = tuple(os.path.abspath(p) for p in readonly)
        confine, _ = confine_reviewer(roots, network=network, record=established, state_dir=state)

    def require(images: Mapping[str, Image]) -> None:  # (2), under the store lock, before the reviewer runs
        problems = decide_images(handoff, images)
        if require_more is not None:
            problems += require_more(images)
        if problems:
            raise VerificationError(findings=problems)

    fd = os.memfd_create("attest-review-result", os.MFD_CLOEXEC)
    try:
        # ``_verified``: the images review exec --review took from this store (seal, every byte,
        # seal) moments before, for this run; run_from_images then checks only their seals again.
        refs: dict[str, str | Image] = dict(_verified) if _verified is not None else \
            {name.upper(): handoff.images[name].identity for name in IMAGE_NAMES}
        if _verified is None:
            refs.update(more_images or {})
        rc = run_from_images(state, refs, argv, cwd_image="BASE", pass_env=pass_env, set_env=set_env, stdout=fd,
                             before=require, confine=confine, attest_env=attest_env)  # (3)
        if rc != 0:
            hint = " (97: the confinement could not be set up; see its message above)" if rc == 97 and confine is not None else ""
            raise EnvironmentFailure(HandoffCode.REVIEWER_FAILED, f"the reviewer exited {rc}{hint}; no result was written", argv[0])
        size = os.fstat(fd).st_size
        if size > MAX_RESULT_BYTES:
            raise VerificationError(HandoffCode.REVIEW_RESULT_INVALID, f"the reviewer printed {size} bytes (at most {MAX_RESULT_BYTES})")
        data = os.pread(fd, size, 0) if size else b""
    finally:
        os.close(fd)
    result = parse_result(data)  # (4)
    path = os.path.abspath(os.fspath(out))
    canonical = _canonical(result.to_json())
    write_atomic(path, canonical, mode=0o644, what="review result")
    confinement = established[-1] if confine is not None else Confinement(False, "host")
    return ReviewRun(handoff, result, path, sha256_of(canonical), confinement)


def _canonical(doc: dict[str, object]) -> bytes:
    return canonical_bytes(doc)


__all__ = [
    "CA_BUNDLES",
    "SENSITIVE_ROOTS",
    "Confinement",
    "EtcFile",
    "ReviewRun",
    "ReviewerImage",
    "confine_reviewer",
    "decide_exposure",
    "decide_images",
    "read_host_file",
    "reviewer_command",
    "reviewer_etc",
    "run_review_step",
    "verify_can_confine",
    "verify_reviewer_image",
]
