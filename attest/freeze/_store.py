"""Freeze before verify, and the content-addressed store of frozen images.

:func:`freeze_tree` follows attest's one invariant for every authority input, private
materialization -> immutability -> verification of the frozen bytes -> publish, in that order
(docs/freeze.md "What freeze does, step by step"):

1. materialize the attested entries of the source into fresh private staging under the
   deployment's state directory (``_materialize``);
2. establish the immutability boundary: the backend seals every inode once it is copied (a
   sealing thread one directory behind the copy lanes; staging is private until then),
   directories after their contents, and the sealed inode numbers and change times are recorded;
3. only then verify the frozen copy against the attested inventory with the safe walker
   (:func:`attest.inventory.verify_tree`): the decisive digests are read from the sealed copy,
   never from the source and never while copying; then confirm that nothing sealed moved
   while it was verified;
4. publish by one atomic ``renameat2(RENAME_NOREPLACE)`` into ``STATE/store/<hex identity>``.

On any failure nothing is published and staging is removed (immutable flags cleared first).

Every use of a stored image (reuse by a later freeze, ``exec``, ``store ls --check``) goes
through :func:`verify_image`: the seal is confirmed, then **every byte** is verified against
the inventory stored beside the tree (whose SHA-256 must be the entry's name), then the seal is
confirmed again. ``record.json`` (inode numbers and change times) is an index that makes a
broken seal cheap to notice, never a witness: whoever can break the seal can rewrite it too.

    >>> image = freeze_tree("src", expected_inventory, "/var/lib/attest", backend="immutable")
    >>> Store("/var/lib/attest").ls()
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypedDict

from .._fdio import write_all
from .._safefs import O_DIR, O_FILE, O_NEW, O_OWN
from ..errors import AttestError, CommonCode, EnvironmentFailure, Finding, InputError, VerificationError
from ..inventory import Inventory, verify_tree
from ..inventory._names import sort_key
from ._backends import Backend, ErofsBackend, get_backend, resolve_backend
from ._codes import FreezeCode
from ._erofs_image import freeze_erofs, verify_erofs
from ._image import INVENTORY_NAME, MAX_RECORD_BYTES, RECORD_NAME, TREE_NAME, VERIFIED, Image, check_image, image_from_record
from ._materialize import Progress, materialize
from ._state import (
    make_private_dir,
    open_state,
    open_sub,
    random_name,
    remove_tree,
    state_lock,
)

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
# Where the build layer keeps its staging under the same state directory, each entry flock-ed
# by the build that uses it (attest.builder._common.make_staging); gc removes the unlocked ones.
HELD_STAGING = "build-staging"
_IDENTITY = re.compile(r"sha256:[0-9a-f]{64}\Z")
RENAME_NOREPLACE = 1
DEFAULT_RECENT = 7 * 24 * 3600.0
_libc = ctypes.CDLL(None, use_errno=True)


def _rename_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    rc = _libc.renameat2(src_dir, src.encode(), dst_dir, dst.encode(), RENAME_NOREPLACE)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _effective(expected: Inventory, mask: int) -> Inventory:
    """The inventory the frozen image must match: attested modes minus the backend's mask."""
    if not mask:
        return expected
    return Inventory.from_entries([dataclasses.replace(e, mode=e.mode & ~mask) for e in expected.entries], expected.ignore)


class Store:
    """The content-addressed store under a deployment-managed state directory.

    Raises:
        VerificationError: ``NOT_IN_STORE`` (``resolve``/``get``: a reference that is not an
            image of this store, or no such entry), ``BAD_RECORD`` and the seal and content
            codes of :func:`verify_image` (``get``/``lookup``: an entry that no longer holds),
            ``STATE_SYMLINK`` (a link or non-directory planted in the state
            directory).
        InputError: ``BAD_IMAGE_REF`` (``gc``: a kept identity that is not ``sha256:<64 hex>``).
        EnvironmentFailure: ``STATE_INSECURE`` (the state directory or an ancestor is shared)
            and ``STAGING_FAILED`` (a state subdirectory cannot be opened or created).
        ``tree_path`` raises nothing; ``ls`` and ``gc`` report entries that do not hold as
        findings (``StoreEntry.problems``, ``GcResult.broken``) instead of raising.
    """

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.state_dir = os.path.abspath(os.fspath(state_dir))

    # -- paths and records; entries through the descriptors of an open state directory (freeze and exec use these too)

    def tree_path(self, hexid: str) -> str:
        return f"{self.state_dir}/store/{hexid}/{TREE_NAME}"

    def load_record(self, store_fd: int, hexid: str, known: Inventory | None = None) -> Image | None:
        """The stored image named ``hexid`` from its record, or None when there is no entry.

        ``known``: the caller's inventory of that identity (a freeze's attested one). The stored
        inventory must then be exactly its bytes, and is not parsed again.
        """
        where = f"{self.state_dir}/store/{hexid}"
        try:
            efd = os.open(hexid, O_DIR, dir_fd=store_fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise VerificationError(FreezeCode.BAD_RECORD, f"the store entry cannot be opened safely: {e.strerror}", where) from e
        try:
            data = _read_entry_file(efd, RECORD_NAME, "store record", where)
            inventory_bytes = _read_entry_file(efd, INVENTORY_NAME, "stored inventory", where)
        finally:
            os.close(efd)
        if hashlib.sha256(inventory_bytes).hexdigest() != hexid:
            raise VerificationError(FreezeCode.BAD_RECORD, "the stored inventory is not the one the entry is named after", where)
        if known is not None and inventory_bytes == known.canonical:
            inventory = known  # the same canonical bytes: the same inventory
        else:
            try:
                inventory = Inventory.from_bytes(inventory_bytes, what="stored inventory")
            except AttestError as e:
                raise VerificationError(FreezeCode.BAD_RECORD, f"the stored inventory does not parse: {e.detail}", where) from e
        try:
            image = image_from_record(data, self.tree_path(hexid), where)
        except VerificationError:
            raise
        except AttestError as e:  # malformed JSON from loads_strict is an InputError
            raise VerificationError(FreezeCode.BAD_RECORD, e.detail, where) from e
        if image.hex != hexid:
            raise VerificationError(FreezeCode.BAD_RECORD, f"the record names {image.identity}, not the entry's identity", where)
        return dataclasses.replace(image, inventory=inventory)

    def touch_use(self, state_fd: int, hexid: str, now: float | None) -> None:
        """Record that the image ``hexid`` was used at ``now`` (the time of its ``uses`` file, which ``gc --recent`` reads)."""
        ufd = open_sub(state_fd, "uses", f"{self.state_dir}/uses")
        try:
            fd = os.open(hexid, O_OWN, 0o600, dir_fd=ufd)
            try:
                when = time.time() if now is None else now
                os.utime(fd, (when, when))
            finally:
                os.close(fd)
        finally:
            os.close(ufd)

    def discard(self, store_fd: int, staging_fd: int, hexid: str) -> None:
        """Move a store entry aside atomically, then remove it (clearing its flags)."""
        aside = random_name("discard")
        _rename_noreplace(store_fd, hexid, staging_fd, aside)
        remove_tree(staging_fd, aside)

    # -- public operations -------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """The hex identity named by ``ref``: ``sha256:<hex>`` or the image path printed by freeze."""
        if _IDENTITY.match(ref):
            return ref[7:]
        path = os.path.abspath(ref)
        entry, tail = os.path.split(path)
        store, hexid = os.path.split(entry)
        if tail != TREE_NAME or not _HEX64.match(hexid) or store != f"{self.state_dir}/store":
            raise VerificationError(
                FreezeCode.NOT_IN_STORE, f"not an image of the store under {self.state_dir} (expected {self.state_dir}/store/<hex>/tree)", ref
            )
        return hexid

    def get(self, ref: str) -> Image:
        """The stored image named by ``ref`` after :func:`verify_image` (seal, every byte, seal); raises otherwise."""
        hexid = self.resolve(ref)
        state_fd = open_state(self.state_dir, create=False)
        image: Image | None = None
        try:
            try:  # a state directory nothing was frozen into (only fetched into, say) has no store: no image either
                os.stat("store", dir_fd=state_fd, follow_symlinks=False)
                stored = True
            except FileNotFoundError:
                stored = False
            if stored:
                store_fd = open_sub(state_fd, "store", f"{self.state_dir}/store", create=False)
                try:
                    image = self.load_record(store_fd, hexid)
                finally:
                    os.close(store_fd)
        finally:
            os.close(state_fd)
        if image is None:
            state = os.path.abspath(self.state_dir)
            where = f"in the store of {state}" if stored else f"in {state}: nothing was frozen into this state directory"
            raise VerificationError(FreezeCode.NOT_IN_STORE, f"no such image {where}; freeze it first, or name the state "
                                    "directory it was frozen into: --state-dir DIR or $ATTEST_STATE_DIR", ref)
        verify_image(image)
        return dataclasses.replace(image, verified=VERIFIED)

    def lookup(self, identity: str) -> Image | None:
        """The stored image of ``identity`` if there is one and its seal holds; None if absent.

        Raises (``IMAGE_*``, ``BAD_RECORD``) when an entry exists but no longer holds.
        """
        try:
            return self.get(identity)
        except VerificationError as e:
            if e.code == FreezeCode.NOT_IN_STORE and _IDENTITY.match(identity):
                return None
            raise

    def ls(self, *, check: bool = False) -> list[StoreEntry]:
        """Every published image, sorted by identity; with ``check``, whether its seal holds."""
        state_fd = open_state(self.state_dir, create=False)
        out: list[StoreEntry] = []
        try:
            store_fd = open_sub(state_fd, "store", f"{self.state_dir}/store")
            uses_fd = open_sub(state_fd, "uses", f"{self.state_dir}/uses")
            try:
                for name in sorted(os.listdir(store_fd)):
                    if not _HEX64.match(name):
                        continue
                    try:
                        image = self.load_record(store_fd, name)
                        problems: tuple[Finding, ...] = _problems(image) if (check and image is not None) else ()
                    except VerificationError as e:
                        out.append(StoreEntry(f"sha256:{name}", self.tree_path(name), None, None, _last_use(uses_fd, name), e.findings,
                                              checked=True))
                        continue
                    if image is None:
                        continue
                    out.append(StoreEntry(image.identity, image.path, image.backend, image.created, _last_use(uses_fd, name), problems,
                                          checked=check))
            finally:
                os.close(store_fd)
                os.close(uses_fd)
        finally:
            os.close(state_fd)
        return out

    def _seal_problems(self, store_fd: int, hexid: str) -> tuple[Finding, ...]:
        """The seal check of one entry (cheap: flags, inodes, change times), as findings."""
        try:
            image = self.load_record(store_fd, hexid)
        except VerificationError as e:
            return e.findings
        if image is None:
            return (Finding(FreezeCode.NOT_IN_STORE, f"sha256:{hexid}", "a kept image is not in the store"),)
        return tuple(check_image(image))

    def gc(self, *, keep: Iterable[str] = (), recent: float = DEFAULT_RECENT, now: float | None = None, dry_run: bool = False) -> GcResult:
        """Remove every image neither in ``keep`` (identities) nor used within ``recent`` seconds.

        Holds the state lock exclusively, so no freeze or exec is using what it removes; also
        removes staging left behind by interrupted freezes, runs and builds (build staging only when
        no live build holds its lock). Flags are cleared only on
        what is removed. Nothing left there stops it (a deep tree, a FIFO, a 0000-mode
        directory are removed): an entry that cannot be removed is a ``REMOVAL_FAILED`` finding
        in ``GcResult.broken``, and everything else is still removed.
        """
        keep_hex = set()
        for ident in keep:
            if not _IDENTITY.match(ident):
                raise InputError(FreezeCode.BAD_IMAGE_REF, "a kept identity must be sha256:<64 hex>", ident)
            keep_hex.add(ident[7:])
        broken: list[Finding] = []
        when = time.time() if now is None else now
        removed: list[str] = []
        kept: list[str] = []
        staging: list[str] = []  # the leftover staging of interrupted freezes, runs and builds removed (or, dry, to remove)
        state_fd = open_state(self.state_dir, create=False)
        try:
            with state_lock(state_fd, exclusive=True):
                subs = {n: open_sub(state_fd, n, f"{self.state_dir}/{n}") for n in ("store", "uses", "staging", "runs")}
                # What interrupted freezes and runs left, listed before images are moved aside into staging below.
                left = {sub: sorted(os.listdir(subs[sub])) for sub in ("staging", "runs")}
                try:
                    for name in sorted(os.listdir(subs["store"])):
                        if not _HEX64.match(name):
                            continue
                        last = _last_use(subs["uses"], name)
                        if name in keep_hex or (last is not None and last >= when - recent):
                            kept.append(f"sha256:{name}")
                            if name in keep_hex:  # a pin refers to it: say so if it no longer holds
                                broken.extend(self._seal_problems(subs["store"], name))
                            continue
                        removed.append(f"sha256:{name}")
                        if not dry_run:
                            try:
                                self.discard(subs["store"], subs["staging"], name)
                            except OSError as e:  # not even moved aside: the entry stays, reported
                                broken.append(Finding(FreezeCode.REMOVAL_FAILED, f"{self.state_dir}/store/{name}",
                                                      f"cannot move the image aside to remove it: {e.strerror}"))
                                removed.pop()
                                continue
                            except EnvironmentFailure:
                                pass  # moved aside into staging, out of the store: the sweep below retries and reports it
                            try:
                                os.unlink(name, dir_fd=subs["uses"])
                            except FileNotFoundError:
                                pass
                    if dry_run:
                        staging += [f"{self.state_dir}/{sub}/{name}" for sub in ("staging", "runs") for name in left[sub]]
                    else:
                        # Whatever a command, a reviewer or a build step left there (a deep tree, a
                        # FIFO, a 0000-mode directory) never stops the collection: what cannot be
                        # removed is reported (REMOVAL_FAILED) and everything else is removed.
                        for sub in ("staging", "runs"):
                            for name in os.listdir(subs[sub]):
                                try:
                                    remove_tree(subs[sub], name, f"{self.state_dir}/{sub}/{name}")
                                except EnvironmentFailure as e:
                                    broken.extend(e.findings)
                                    continue
                                if name in left[sub]:  # not an image this collection moved aside
                                    staging.append(f"{self.state_dir}/{sub}/{name}")
                    gone, failed = _remove_abandoned(state_fd, f"{self.state_dir}/{HELD_STAGING}", dry_run=dry_run)
                    staging += gone
                    broken.extend(failed)
                finally:
                    for fd in subs.values():
                        os.close(fd)
        finally:
            os.close(state_fd)
        missing = sorted(keep_hex - {k[7:] for k in kept} - {r[7:] for r in removed})
        broken.extend(Finding(FreezeCode.NOT_IN_STORE, f"sha256:{h}", "a kept image is not in the store") for h in missing)
        return GcResult(tuple(removed), tuple(kept), dry_run, tuple(broken), tuple(staging))


class StoreEntryJson(TypedDict):
    """What :meth:`StoreEntry.to_json` gives (one image of ``store ls --json``)."""

    identity: str
    image: str
    backend: str | None
    created: int | None
    last_used: int | None
    holds: bool | None  # None unless the listing checked it
    problems: list[dict[str, object]]


class GcResultJson(TypedDict):
    """What :meth:`GcResult.to_json` gives (``store gc --json``)."""

    removed: list[str]
    kept: list[str]
    staging: list[str]
    dry_run: bool
    broken: list[dict[str, object]]


@dataclass(frozen=True, slots=True)
class StoreEntry:
    """One line of ``store ls``: an image, its seal, its last use, and its problems if checked.

    Raises:
        Nothing.
    """

    identity: str
    path: str
    backend: str | None
    created: int | None
    last_used: float | None
    problems: tuple[Finding, ...] = ()
    checked: bool = False  # whether this listing verified it (``--check``): "holds" is unknown otherwise

    def to_json(self) -> StoreEntryJson:
        return {
            "identity": self.identity,
            "image": self.path,
            "backend": self.backend,
            "created": self.created,
            "last_used": None if self.last_used is None else int(self.last_used),
            "holds": (not self.problems) if self.checked else None,
            "problems": [f.to_json() for f in self.problems],
        }


@dataclass(frozen=True, slots=True)
class GcResult:
    """What :meth:`Store.gc` removed and kept, and the kept images that no longer hold.

    Raises:
        Nothing.
    """

    removed: tuple[str, ...]
    kept: tuple[str, ...]
    dry_run: bool
    broken: tuple[Finding, ...] = ()  # kept (pinned) images that no longer hold or are absent; what could not be removed
    staging: tuple[str, ...] = ()  # paths of the staging interrupted freezes, runs and builds left, removed (dry: to remove)

    def to_json(self) -> GcResultJson:
        return {"removed": list(self.removed), "kept": list(self.kept), "staging": list(self.staging), "dry_run": self.dry_run,
                "broken": [f.to_json() for f in self.broken]}


def _remove_abandoned(state_fd: int, where: str, *, dry_run: bool = False) -> tuple[list[str], list[Finding]]:
    """Remove every ``STATE/build-staging/*`` that no live process holds (its flock is free).

    A build holds an exclusive flock on its staging directory while it runs; one that was
    interrupted (killed, the machine rebooted) leaves it unlocked. Returns the paths removed
    (with ``dry_run``, the ones that would be, none removed) and a ``REMOVAL_FAILED`` finding
    for each entry that could not be removed entirely (the rest of it is).
    """
    try:
        held = open_sub(state_fd, HELD_STAGING, where, create=False)
    except EnvironmentFailure as e:
        if isinstance(e.__cause__, FileNotFoundError):
            return [], []
        raise
    removed: list[str] = []
    failed: list[Finding] = []
    try:
        for name in sorted(os.listdir(held)):
            try:
                try:
                    fd = os.open(name, O_DIR, dir_fd=held)
                except OSError:
                    if not dry_run:
                        remove_tree(held, name, f"{where}/{name}")  # not a directory a build made: nothing holds it
                    removed.append(f"{where}/{name}")
                    continue
                try:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # a live build holds it
                    if not dry_run:
                        remove_tree(held, name, f"{where}/{name}")
                    removed.append(f"{where}/{name}")
                finally:
                    os.close(fd)
            except EnvironmentFailure as e:
                failed.extend(e.findings)
    finally:
        os.close(held)
    return removed, failed


def _last_use(uses_fd: int, name: str) -> float | None:
    try:
        return os.stat(name, dir_fd=uses_fd, follow_symlinks=False).st_mtime
    except FileNotFoundError:
        return None


def _read_entry_file(efd: int, name: str, what: str, where: str) -> bytes:
    try:
        fd = os.open(name, O_FILE, dir_fd=efd)
    except OSError as e:
        raise VerificationError(FreezeCode.BAD_RECORD, f"the {what} cannot be opened: {e.strerror}", where) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RECORD_BYTES:
            raise VerificationError(FreezeCode.BAD_RECORD, f"the {what} is not a bounded regular file", where)
        return b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
    finally:
        os.close(fd)


def verify_image(image: Image, *, progress: Progress | None = None) -> None:
    """Raise unless the stored image holds, for this use.

    1. the seal holds (flags, inode numbers, change times: cheap, and catches most tampering);
    2. every entry and every byte match the image's inventory (the seal can be broken and
       re-made, and the record rewritten, by whoever holds the capability: only the content
       read now, after the seal was confirmed, decides);
    3. nothing sealed moved while it was verified.

    Raises:
        VerificationError: step 1: ``IMAGE_NOT_IMMUTABLE`` / ``IMAGE_CHANGED``; ``BAD_RECORD``
            (no inventory of the image's identity); step 2: ``IMAGE_CHANGED`` followed by the
            inventory differences (``MISSING``, ``EXTRA``, ``DIGEST_MISMATCH``, ...); step 3:
            ``CHANGED_AFTER_FREEZE``.
        InputError: ``UNKNOWN_BACKEND`` for an image whose backend is not registered.
    """
    problems = check_image(image)
    if problems:
        raise VerificationError(findings=problems)
    if image.inventory is None or image.inventory.identity != image.identity:
        raise VerificationError(FreezeCode.BAD_RECORD, "the image has no inventory of its identity to verify its bytes against", image.path)
    try:
        if image.backend == "erofs" or image.erofs is not None:
            if image.erofs is None or image.backend != "erofs":
                raise VerificationError(FreezeCode.BAD_RECORD, "an erofs image's record must describe its image file", image.path)
            verify_erofs(image, image.inventory, progress)  # one hash of the file AND every entry through a mount
        else:
            # exact: the image was copied from the listed entries only, so no ignore pattern applies.
            verify_tree(image.path, _effective(image.inventory, get_backend(image.backend).mode_mask), progress=progress, exact=True)
    except VerificationError as e:
        raise VerificationError(findings=[Finding(FreezeCode.IMAGE_CHANGED, None, "the stored bytes are not the image's inventory"),
                                          *e.findings]) from e
    moved = check_image(image, flags=False)
    if moved:
        raise VerificationError(
            findings=[Finding(FreezeCode.CHANGED_AFTER_FREEZE, f.path, f"changed while it was verified: {f.detail}") for f in moved]
        )


def _problems(image: Image) -> tuple[Finding, ...]:
    try:
        verify_image(image)
    except VerificationError as e:
        return e.findings
    return ()


def freeze_tree(
    source: str | os.PathLike[str],
    expected: Inventory,
    state_dir: str | os.PathLike[str],
    *,
    backend: str | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
    workers: int = 2,
) -> Image:
    """Freeze ``source`` into the store, verified against ``expected``; see the module docstring.

    Raises:
        InputError: ``UNKNOWN_BACKEND``; ``UNREADABLE`` (the source is missing or not a
            directory).
        VerificationError: the materialization's findings (``MISSING``, ``EXTRA``,
            ``DIGEST_MISMATCH``, ``SYMLINK``, ``HARDLINK``, ...), ``CHANGED_AFTER_FREEZE``,
            ``STORE_CONFLICT`` (the identity is stored under another backend, or occupied by an
            entry that does not hold), ``STAGING_EXISTS``, ``STATE_SYMLINK`` (a link or non-directory planted in the state
            directory).
        EnvironmentFailure: ``BACKEND_UNAVAILABLE``, ``STATE_INSECURE``, ``STAGING_FAILED``.
    """
    backend = resolve_backend(backend)
    seal_with = get_backend(backend)
    store = Store(state_dir)
    try:  # even when the stored image will be reused: a missing source is a mistake, not a success
        is_dir = stat.S_ISDIR(os.stat(source).st_mode)
    except OSError as e:
        raise InputError(CommonCode.UNREADABLE, f"cannot read the source: {e.strerror}", os.fspath(source)) from e
    if not is_dir:
        raise InputError(CommonCode.UNREADABLE, "the source is not a directory", os.fspath(source))
    state_fd = open_state(store.state_dir)
    try:
        with state_lock(state_fd, exclusive=False):
            staging_fd = open_sub(state_fd, "staging", f"{store.state_dir}/staging")
            store_fd = open_sub(state_fd, "store", f"{store.state_dir}/store")
            at = _OpenStore(store, state_fd, staging_fd, store_fd, clock)
            try:
                reused = _try_reuse(at, expected, backend)
                if reused is not None:
                    return reused
                return _freeze_into(at, random_name("tmp"), source=source, expected=expected, seal_with=seal_with,
                                    progress=progress, workers=workers)
            finally:
                os.close(staging_fd)
                os.close(store_fd)
    finally:
        os.close(state_fd)


@dataclasses.dataclass(frozen=True, slots=True)
class _OpenStore:
    """The store and the descriptors of its state directory a freeze holds (under the shared lock), and its clock."""

    store: Store
    state_fd: int
    staging_fd: int
    store_fd: int
    clock: Callable[[], float]


def _try_reuse(at: _OpenStore, expected: Inventory, backend: str) -> Image | None:
    hexid = expected.digest_hex
    try:
        existing = at.store.load_record(at.store_fd, hexid, expected)
    except VerificationError:
        existing = None
        at.store.discard(at.store_fd, at.staging_fd, hexid)  # an unreadable record is a stale entry
    if existing is None:
        return None
    if existing.backend != backend:
        raise VerificationError(
            FreezeCode.STORE_CONFLICT,
            f"the store holds this identity sealed with {existing.backend!r}, not {backend!r}; choose that backend (--backend {existing.backend} or $ATTEST_BACKEND={existing.backend}), or remove the image with `attest store gc`",
            existing.path,
        )
    if not _problems(existing):
        at.store.touch_use(at.state_fd, hexid, at.clock())
        return dataclasses.replace(existing, reused=True, verified=VERIFIED)
    # The image does not hold: the stored bytes decide nothing. Remove them and freeze afresh.
    at.store.discard(at.store_fd, at.staging_fd, hexid)
    return None


def _freeze_tree_into(wrap_fd: int, wrap_path: str, *, source: str | os.PathLike[str], expected: Inventory, seal_with: Backend,
                      created: int, progress: Progress | None, workers: int) -> Image:
    """(1)-(3) for a backend that seals the tree itself: the unpublished, verified image in staging."""
    # (1)+(2) Private materialization; every inode sealed once copied, all sealed on return.
    tree_fd = make_private_dir(wrap_fd, TREE_NAME, f"{wrap_path}/{TREE_NAME}")
    try:
        findings, sealed = materialize(source, expected, tree_fd, seal_with, workers=workers)
        dev = os.fstat(tree_fd).st_dev
    finally:
        os.close(tree_fd)
    if findings:
        raise VerificationError(findings=sorted(findings, key=lambda f: (sort_key(f.path) if f.path else (), f.code)))
    image = Image(f"{wrap_path}/{TREE_NAME}", expected.identity, seal_with.name, dev, created, tuple(sealed), inventory=expected)
    # (3) Verify the frozen bytes, read from the sealed copy, against the attested inventory.
    verify_tree(image.path, _effective(expected, seal_with.mode_mask), progress=progress, exact=True)
    # Flags need not be read again: changing a flag or mode moves the change time too.
    moved = check_image(image, flags=False)
    if moved:
        raise VerificationError(
            findings=[Finding(FreezeCode.CHANGED_AFTER_FREEZE, f.path, f"changed while it was verified: {f.detail}") for f in moved]
        )
    return image


def _freeze_into(
    at: _OpenStore,
    name: str,
    *,
    source: str | os.PathLike[str],
    expected: Inventory,
    seal_with: Backend,
    progress: Progress | None,
    workers: int,
) -> Image:
    hexid = expected.digest_hex
    wrap_path = f"{at.store.state_dir}/staging/{name}"
    wrap_fd = make_private_dir(at.staging_fd, name, wrap_path)
    published = False
    try:
        seal_with.probe(wrap_fd, wrap_path)
        if isinstance(seal_with, ErofsBackend):  # (1)-(3) as one image file, verified through its mount
            image = freeze_erofs(wrap_fd, wrap_path, source=source, expected=expected, backend=seal_with, created=int(at.clock()),
                                 progress=progress, workers=workers)
        else:
            image = _freeze_tree_into(wrap_fd, wrap_path, source=source, expected=expected, seal_with=seal_with,
                                      created=int(at.clock()), progress=progress, workers=workers)
        for fname, content in ((INVENTORY_NAME, expected.canonical), (RECORD_NAME, image.record_bytes())):
            rfd = os.open(fname, O_NEW, 0o400, dir_fd=wrap_fd)
            try:
                write_all(rfd, content)
                os.fsync(rfd)
                seal_with.seal(rfd)
            finally:
                os.close(rfd)
        # (4) Publish atomically; an identity published meanwhile by another freeze is reused if sound.
        try:
            _rename_noreplace(at.staging_fd, name, at.store_fd, hexid)
            published = True
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise EnvironmentFailure(FreezeCode.STAGING_FAILED, f"cannot publish: {e.strerror}", wrap_path) from e
            other = at.store.load_record(at.store_fd, hexid, expected)
            if other is None or other.backend != seal_with.name or _problems(other):
                raise VerificationError(FreezeCode.STORE_CONFLICT, "another entry occupies this identity and does not hold", at.store.tree_path(hexid)) from e
            at.store.touch_use(at.state_fd, hexid, at.clock())
            return dataclasses.replace(other, reused=True, verified=VERIFIED)
        os.fsync(at.store_fd)
        at.store.touch_use(at.state_fd, hexid, at.clock())
        return dataclasses.replace(image, path=at.store.tree_path(hexid), verified=VERIFIED)
    except BaseException as failure:
        os.close(wrap_fd)
        wrap_fd = -1
        if not published:
            try:
                remove_tree(at.staging_fd, name, wrap_path)
            except EnvironmentFailure as e:  # keep the reason the freeze failed; say staging is left for gc
                failure.add_note(f"staging {wrap_path} could not be removed ({e.detail}); attest store gc removes it")
        raise
    finally:
        if wrap_fd >= 0:
            os.close(wrap_fd)
            if not published:
                remove_tree(at.staging_fd, name, wrap_path)  # REMOVAL_FAILED if it cannot be
