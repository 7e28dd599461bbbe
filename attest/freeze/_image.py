"""A frozen image, its store record, and the cheap check that its seal still holds.

The record is written when the image is sealed: for every entry, its inode number and inode
change time (``st_ctime_ns``) right after the seal. Changing the bytes, the mode or the
immutable flag of an entry, or replacing it, moves its change time or its inode, and the
kernel (multigrain timestamps, Linux 6.13+) gives a distinct change time to a change made
just after a ``stat``. So "every entry is still present, sealed, with the recorded inode and
change time, and nothing was added" is a cheap, early refusal of a careless change. It proves
nothing against whoever can break the seal, because that capability also rewrites the record:
every use of a stored image therefore verifies its bytes as well
(:func:`attest.freeze.verify_image`). The record is an index, never a witness. Only while a
command runs from an image that was just verified (``exec``'s after-check) does the record
taken at that verification stand for the bytes.

    >>> problems = check_image(image)      # [] when the seal still holds
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import TypedDict

from .._json import canonical_bytes, loads_strict
from .._safefs import Drift, UnsafeEntry, open_listed_at
from ..errors import AttestError, Finding, VerificationError
from ..inventory import Inventory, open_root
from ._backends import BACKENDS, Backend, StatxReader
from ._codes import FreezeCode
from ._erofs import IMAGE_NAME, ErofsRecord, image_file_problems, record_from_json

RECORD_FORMAT = "https://attest.dev/freeze-record/v1"
RECORD_NAME = "record.json"
# The canonical bytes of the inventory the image verified against; its SHA-256 is the entry's
# name, so it cannot be swapped for another without renaming the entry.
INVENTORY_NAME = "inventory.json"
TREE_NAME = "tree"
MAX_RECORD_BYTES = 256 * 1024 * 1024
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_DIGITS = re.compile(r"(0|[1-9][0-9]{0,19})\Z")
_NUMBERS = re.compile(r"(?:(?:0|[1-9][0-9]{0,19}) )+\Z")


@dataclass(frozen=True, slots=True)
class Sealed:
    """One entry as it was right after the seal. ``path`` is ``""`` for the image root."""

    path: str
    is_dir: bool
    ino: int
    ctime_ns: int


#: The value of :attr:`Image.verified` on an image that verified for this use.
VERIFIED = object()


class ImageJson(TypedDict):
    """What :meth:`Image.to_json` gives (``attest freeze --json``): where the image is, what it holds, how sealed."""

    image: str
    identity: str
    backend: str
    reused: bool


@dataclass(frozen=True, slots=True)
class Image:
    """A verified frozen image in the store.

    ``path`` is the frozen tree, ``identity`` the attested inventory identity it verified
    against, ``backend`` the seal, ``sealed`` the per-entry record, ``reused`` whether this
    freeze reused an already stored image.

    Raises:
        Nothing: ``record_bytes`` and ``to_json`` encode fields that were validated when the
        image was made or read back (:func:`image_from_record`).
    """

    path: str
    identity: str
    backend: str
    dev: int
    created: int
    sealed: tuple[Sealed, ...]
    reused: bool = False
    #: The inventory the content is verified against, every time the image is used.
    inventory: Inventory | None = None
    #: Set only on what Store.get and freeze_tree return, after the image verified: the mark
    #: run_from_images requires before it checks the seal instead of every byte.
    verified: object = field(default=None, compare=False, repr=False)
    #: The image file of an ``erofs`` image (None for the other backends, whose tree is the image).
    erofs: ErofsRecord | None = None

    @property
    def hex(self) -> str:
        return self.identity.removeprefix("sha256:")

    @property
    def entry_path(self) -> str:
        """The store entry (or staging directory) that holds the tree, its inventory and record."""
        return os.path.dirname(self.path)

    def record_bytes(self) -> bytes:
        doc: dict[str, object] = {
            "format": RECORD_FORMAT,
            "identity": self.identity,
            "backend": self.backend,
            "dev": str(self.dev),
            "created": self.created,
            "entries": [[s.path, "dir" if s.is_dir else "file", str(s.ino), str(s.ctime_ns)] for s in self.sealed],
        }
        if self.erofs is not None:
            doc["erofs"] = self.erofs.to_json()
        return canonical_bytes(doc)

    def to_json(self) -> ImageJson:
        return {"image": self.path, "identity": self.identity, "backend": self.backend, "reused": self.reused}


def _bad(detail: str, where: str) -> VerificationError:
    return VerificationError(FreezeCode.BAD_RECORD, detail, where)


# Parsed records by their exact bytes and tree path. A parse is a pure function of the two and an
# Image is immutable, so a record read again (every step of a review run gets its images from the
# store again: 28 times in the demo's second run) is not parsed again. It only saves the parse:
# every use still checks the seal and every byte (verify_image). Only successful parses are kept.
_PARSED: dict[tuple[bytes, str], Image] = {}
_PARSED_MAX = 16


def image_from_record(data: bytes, tree_path: str, where: str) -> Image:
    """Parse a store record strictly (our own format, but read back from disk)."""
    key = (bytes(data), tree_path)
    image = _PARSED.get(key)
    if image is None:
        image = _image_from_record(key[0], tree_path, where)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = image
    return image


def _image_from_record(data: bytes, tree_path: str, where: str) -> Image:
    doc = loads_strict(data, what="store record", max_bytes=MAX_RECORD_BYTES)
    fields = {"format", "identity", "backend", "dev", "created", "entries"}
    if isinstance(doc, dict) and doc.get("backend") == "erofs":
        fields.add("erofs")  # an erofs image's record also describes its image file
    if not isinstance(doc, dict) or set(doc) != fields:
        raise _bad("the record does not have exactly the fields of a store record", where)
    if doc["format"] != RECORD_FORMAT:
        raise _bad(f"format {doc['format']!r} is not {RECORD_FORMAT!r}", where)
    identity = doc["identity"]
    if not isinstance(identity, str) or not identity.startswith("sha256:") or not _HEX64.match(identity[7:]):
        raise _bad("identity is not sha256:<64 hex>", where)
    if doc["backend"] not in BACKENDS:
        raise _bad(f"unknown backend {doc['backend']!r}", where)
    if not isinstance(doc["dev"], str) or not _DIGITS.match(doc["dev"]) or type(doc["created"]) is not int:
        raise _bad("dev or created is malformed", where)
    raw = doc["entries"]
    # Validated column by column (C-level passes over 10^4-10^5 entries, no per-entry Python
    # branch): every entry a list of four strings [path, "dir"|"file", ino, ctime], ino and
    # ctime decimal without leading zeros, at most 20 digits.
    if type(raw) is not list or not raw:
        raise _bad("entries must be a non-empty list", where)
    if set(map(type, raw)) != {list} or set(map(len, raw)) != {4}:
        raise _bad("malformed entry: every entry must be a list of four fields", where)
    paths, kinds, inos, ctimes = zip(*raw, strict=True)
    if set(map(type, paths)) | set(map(type, kinds)) | set(map(type, inos)) | set(map(type, ctimes)) != {str}:
        raise _bad("malformed entry: every field must be a string", where)
    if not set(kinds) <= {"dir", "file"}:
        raise _bad(f"malformed entry: kind {sorted(set(kinds) - {'dir', 'file'})[0][:40]!r}", where)
    numbers = " ".join(inos) + " " + " ".join(ctimes) + " "
    # Exactly one space per field (none inside one), and only digits between the spaces.
    if numbers.count(" ") != 2 * len(raw) or not _NUMBERS.match(numbers):
        raise _bad("malformed entry: an inode number or change time is not a decimal of at most 20 digits", where)
    sealed = list(map(Sealed, paths, [k == "dir" for k in kinds], map(int, inos), map(int, ctimes)))
    if sealed[0].path != "" or not sealed[0].is_dir or len({s.path for s in sealed}) != len(sealed):
        raise _bad("the first entry must be the root directory and paths must be unique", where)
    erofs = record_from_json(doc["erofs"], where) if "erofs" in doc else None
    if erofs is not None and (len(sealed) != 1):
        raise _bad("an erofs image's tree is its mount point alone", where)
    return Image(tree_path, identity, doc["backend"], int(doc["dev"]), doc["created"], tuple(sealed), erofs=erofs)


def snapshot(fd: int, path: str, is_dir: bool) -> Sealed:
    st = os.fstat(fd)
    return Sealed(path, is_dir, st.st_ino, st.st_ctime_ns)


def check_image(image: Image, *, flags: bool = True, max_findings: int = 100) -> list[Finding]:
    """Every way in which ``image`` no longer is what was sealed; [] when its seal holds.

    Walks the tree through directory descriptors without following links; every entry it
    opens goes through :func:`attest._safefs.open_listed_at`. With ``flags``
    the backend's own seal (the immutable flag, the absent write bits) is read from every
    entry too; without it only presence, inode and change time are compared (any change of
    the seal itself moves the change time).

    Raises:
        Nothing: every problem is a returned finding (``IMAGE_CHANGED``,
        ``IMAGE_NOT_IMMUTABLE``), an image root that cannot be opened safely included.
    """
    check = _SealCheck(image, flags, max_findings)
    try:
        root = open_root(image.path)
    except AttestError as e:  # a link in the path, or the root vanished / is not a directory
        return [Finding(FreezeCode.IMAGE_CHANGED, image.path, f"the image root cannot be opened safely: {e.detail}")]
    rst = os.fstat(root)
    if rst.st_dev != image.dev:
        os.close(root)
        return [Finding(FreezeCode.IMAGE_CHANGED, image.path, "the image is on another device than the one sealed")]
    check.entry(root if check.backend.needs_fd else None, rst, image.sealed[0])
    check.walk(root)
    if not check.findings and check.checks != len(image.sealed):
        check.report(FreezeCode.IMAGE_CHANGED, "", f"checked {check.checks} of {len(image.sealed)} sealed entries")
    if image.erofs is not None:
        check.findings.extend(_image_file_problems(image, flags))
    return check.findings


def _image_file_problems(image: Image, flags: bool) -> list[Finding]:
    """The seal check of an erofs image's file (present, one name, immutable, the recorded inode, change time and size)."""
    assert image.erofs is not None
    try:
        efd = open_root(image.entry_path)
    except AttestError as e:
        return [Finding(FreezeCode.IMAGE_CHANGED, image.entry_path, f"the store entry cannot be opened safely: {e.detail}")]
    try:
        return image_file_problems(efd, image.erofs, f"{image.entry_path}/{IMAGE_NAME}", flags=flags)
    finally:
        os.close(efd)


def _moved(ino: int, s: Sealed) -> str:
    """What became of an entry whose inode or change time is not the sealed one."""
    return "replaced by another inode" if ino != s.ino else "its inode change time moved since the seal"


class _SealCheck:
    """One run of :func:`check_image`: the sealed entries by directory, the findings, the count of entries checked."""

    __slots__ = ("attr", "backend", "checks", "children", "fast", "findings", "flags", "max_findings", "reader")

    def __init__(self, image: Image, flags: bool, max_findings: int) -> None:
        self.backend: Backend = BACKENDS[image.backend]
        self.flags = flags
        self.max_findings = max_findings
        # Per directory: name -> sealed entry (the root is checked on its own).
        self.children: dict[str, dict[str, Sealed]] = {}
        for s in image.sealed:
            if s.path:
                parent, _, name = s.path.rpartition("/")
                self.children.setdefault(parent, {})[name] = s
        self.findings: list[Finding] = []
        # Files are checked without an open: with ``flags``, one statx each (the type, inode and
        # change time, and the backend's statx attribute); without, one lstat each. Entries the
        # statx path cannot decide (no statx, the attribute not reported, a backend without one)
        # take the open/fstat path.
        self.reader = StatxReader() if StatxReader.available() else None
        self.attr = self.backend.statx_attr if flags else 0
        self.fast = self.reader is not None and self.attr != 0
        self.checks = 0

    def report(self, code: FreezeCode, path: str, detail: str) -> None:
        if len(self.findings) < self.max_findings:
            self.findings.append(Finding(code, path or ".", detail))

    def entry(self, fd: int | None, st: os.stat_result, s: Sealed) -> None:
        """Check one entry from its stat (and, for a backend that needs it, its descriptor)."""
        self.checks += 1
        if self.flags:
            why = self.backend.holds(fd, st)
            if why is not None:
                self.report(FreezeCode.IMAGE_NOT_IMMUTABLE, s.path, why)
                return
        if (st.st_ino, st.st_ctime_ns) != (s.ino, s.ctime_ns):
            self.report(FreezeCode.IMAGE_CHANGED, s.path, _moved(st.st_ino, s))

    def walk(self, root: int) -> None:
        """Check everything below ``root`` (whose descriptor this closes).

        Depth first, one descriptor per level: a directory is opened only when it is entered,
        so a directory with thousands of subdirectories holds no more descriptors than a chain.
        """
        try:
            first = self.scan(root, "")
        except BaseException:
            os.close(root)
            raise
        stack: list[tuple[int, list[tuple[str, Sealed, os.stat_result]]]] = [(root, first)]
        try:
            while stack:
                dfd, pending = stack[-1]
                if not pending:
                    stack.pop()
                    os.close(dfd)
                    continue
                name, s, st = pending.pop()
                fd = self.enter(dfd, name, s, st)
                if fd is None:
                    continue
                try:
                    sub = self.scan(fd, s.path)
                except BaseException:
                    os.close(fd)
                    raise
                stack.append((fd, sub))
        finally:
            for dfd, _ in stack:
                os.close(dfd)

    def scan(self, dfd: int, prefix: str) -> list[tuple[str, Sealed, os.stat_result]]:
        """Check the entries of one directory; return its subdirectories, to be entered one at a time."""
        report = self.report
        subdirs: list[tuple[str, Sealed, os.stat_result]] = []
        kids = self.children.get(prefix, {})
        names = os.listdir(dfd)
        if len(names) != len(kids) or not kids.keys() >= set(names):
            for name in sorted(set(names) - kids.keys()):
                report(FreezeCode.IMAGE_CHANGED, f"{prefix}/{name}" if prefix else name, "an entry was added after the seal")
            for name in sorted(kids.keys() - set(names)):
                report(FreezeCode.IMAGE_CHANGED, f"{prefix}/{name}" if prefix else name, "a sealed entry is missing")
            names = [n for n in names if n in kids]
        for name in names:
            s = kids[name]
            if not s.is_dir:
                if not self.flags:
                    self.file_by_lstat(dfd, name, s)
                    continue
                if self.fast and self.file_by_statx(dfd, name, s):
                    continue
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError as e:
                report(FreezeCode.IMAGE_CHANGED, s.path, f"cannot stat: {e.strerror}")
                continue
            fmt = stat.S_IFMT(st.st_mode)
            if fmt != (stat.S_IFDIR if s.is_dir else stat.S_IFREG):
                report(FreezeCode.IMAGE_CHANGED, s.path, "the entry changed type after the seal")
                continue
            if s.is_dir:
                subdirs.append((name, s, st))
                continue
            if not self.backend.needs_fd:
                self.entry(None, st, s)
                continue
            fd = self.enter(dfd, name, s, st)
            if fd is not None:
                os.close(fd)
        subdirs.reverse()  # popped from the end: entered in listing order
        return subdirs

    def file_by_lstat(self, dfd: int, name: str, s: Sealed) -> None:
        """Presence, type, inode and change time only: one lstat (cheaper than statx by ctypes)."""
        self.checks += 1
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as e:
            self.report(FreezeCode.IMAGE_CHANGED, s.path, f"cannot stat: {e.strerror}")
            return
        if stat.S_IFMT(st.st_mode) != stat.S_IFREG:
            self.report(FreezeCode.IMAGE_CHANGED, s.path, "the entry changed type after the seal")
        elif st.st_ino != s.ino or st.st_ctime_ns != s.ctime_ns:
            self.report(FreezeCode.IMAGE_CHANGED, s.path, _moved(st.st_ino, s))

    def file_by_statx(self, dfd: int, name: str, s: Sealed) -> bool:
        """One statx: the type, inode, change time and the backend's attribute; False when it cannot decide."""
        assert self.reader is not None
        attr = self.attr
        got = self.reader.read(dfd, name.encode("utf-8", "surrogateescape"))
        if got is None or not (not attr or got[1] & attr):
            return False
        self.checks += 1
        sx_attrs, _, sx_mode, sx_ino, sx_ctime = got
        if stat.S_IFMT(sx_mode) != stat.S_IFREG:
            self.report(FreezeCode.IMAGE_CHANGED, s.path, "the entry changed type after the seal")
        elif attr and not sx_attrs & attr:
            self.report(FreezeCode.IMAGE_NOT_IMMUTABLE, s.path, "the immutable attribute is not set")
        elif sx_ino != s.ino or sx_ctime != s.ctime_ns:
            self.report(FreezeCode.IMAGE_CHANGED, s.path, _moved(sx_ino, s))
        return True

    def enter(self, dfd: int, name: str, s: Sealed, st: os.stat_result) -> int | None:
        """Open one entry, confirm it is the one just listed, check it; its descriptor or None."""
        try:
            fd, fst = open_listed_at(dfd, name, st)
        except UnsafeEntry as e:
            if e.drift is None:
                self.report(FreezeCode.IMAGE_CHANGED, s.path, "cannot open: became a symbolic link")
            elif e.drift is Drift.TYPE or e.drift is Drift.REPLACED:
                self.report(FreezeCode.IMAGE_CHANGED, s.path, "the entry was replaced while it was checked")
            else:  # the same inode, its link count or special bits changed since it was listed
                self.report(FreezeCode.IMAGE_CHANGED, s.path, f"the entry changed while it was checked ({e.drift.value})")
            return None
        except OSError as e:
            self.report(FreezeCode.IMAGE_CHANGED, s.path, f"cannot open: {e.strerror}")
            return None
        self.entry(fd if self.backend.needs_fd else None, fst, s)
        return fd
