"""`attest install skill`: install the promoted skill, and verify an installation against its attestation.

docs/bootstrap.md "attest install skill": the installed agent-policy Skill is a writable copy and
only ever a copy source. Before anything in it is trusted, the deployment verifies it against
an **installation attestation** stored outside the installed tree and outside every repository
under review: installer repository and full SHA, Skill-source repository and full SHA, the exact
installed root, and the closed inventory of every installed path. :func:`install_skill` writes
that attestation; :func:`verify_installation` is the check `attest bootstrap` step 1 starts with.

    >>> result = install_skill("pins.toml", "/var/lib/attest", "/home/ci/.agents/skills/agent-policy", load_signer("deploy.pem"))
    >>> verify_installation(result.attestation, load_policy("trust.toml"), result.installed_root, SkillPins.from_file("pins.toml"))

:func:`install_skill`, each step failing closed before anything is visible:

1. the ``[skill]`` table `attest promote` wrote to the pins file, parsed strictly; the promotion
   log beside the pins verified under the trust policy, ending at exactly the bytes read and
   continuing the checkpoint the state directory remembers for them (no rollback, no fork;
   :func:`attest.builder._promolog.check_promotion_log`), remembered after step 6;
2. the destination: its parent a real directory, not inside the state directory, not inside a git
   repository (work tree or git directory); the destination itself absent or an empty directory;
3. the promoted skill's build attestation ``S/builds/<name>.skill.json``: its bytes must have the
   pinned digest (promotion verified exactly those bytes under the release policy before pinning
   them, so the pin authenticates them), and every field of it must equal the pins;
4. the promoted image, from the store: :meth:`attest.freeze.Store.get` (seal, every byte, seal),
   named by the pinned inventory identity; it must be a skill image (the root directory and
   everything below it);
5. the skill root is copied from the image into a new sibling of the destination (new inodes,
   the inventory's modes; the sibling is private until it is renamed), and the copy is verified
   against the installed inventory, reading the copy's own bytes;
6. the installation statement is signed (nothing is visible yet);
7. the sibling is renamed onto the destination (atomic), then the attestation is written
   atomically to ``S/installations/<name>-<root digest>.json``; if that write fails the
   destination is removed again, so a failure leaves neither half.

The predicate is the build's installation predicate (``https://attest.dev/installation/v1``,
:func:`attest.builder._attest.build_predicate`) with one more field, ``installed_root``; its
``inventory`` is the closed inventory of the installed root (entries below it).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._digest import sha256_of
from .._fs import read_bounded, write_atomic
from .._json import loads_strict
from .._plural import count
from .._safefs import O_DIR, remove_tree
from ..attestation import (
    INSTALLATION_PREDICATE,
    AttestationCode,
    Envelope,
    Policy,
    Signer,
    check_policy_outside,
    parse_statement,
    sign_statement,
    statement,
    subject,
    tree_inventory,
    verify_attestation_bytes,
)
from ..errors import CommonCode, EnvironmentFailure, Finding, InputError, ReasonCode, VerificationError
from ..freeze import Store
from ..freeze._materialize import materialize
from ..git import is_full_sha
from ..inventory import EntryType, Inventory, check_name, check_tree, open_root
from ._codes import BuildCode
from ._outputs import _Unsealed
from ._promolog import AcceptedLog, check_promotion_log, remember_log
from ._promote import parse_pins

MAX_PINS_BYTES = 1 << 20
MAX_ATTESTATION_BYTES = 64 << 20
INSTALLATIONS = "installations"
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_IDENTITY = re.compile(r"sha256:[0-9a-f]{64}\Z")
# An input-addressed build name (attest.builder._outputs.store_name): 32 hex, a dash, the recipe name.
_BUILD_NAME = re.compile(r"[0-9a-f]{32}-[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_PIN_FIELDS = ("name", "inventory", "root", "source_repository", "source_revision", "installer_repository",
               "installer_revision", "attestation", "provenance")
_BUILD_FIELDS = frozenset({"name", "inputs_digest", "installer", "source", "root", "inventory"})
_INSTALLER_FIELDS = frozenset({"repository", "revision"})
_SOURCE_FIELDS = frozenset({"repository", "revision", "tree", "subtree", "subtree_tree"})


class InstallCode(ReasonCode):
    """Reason codes of `attest install skill` and of :func:`verify_installation` (docs/bootstrap.md)."""

    INSTALL_SKILL_MISSING = "INSTALL_SKILL_MISSING"            # the state holds no build attestation of the pinned skill
    INSTALL_ATTESTATION_MISMATCH = "INSTALL_ATTESTATION_MISMATCH"  # the build attestation is not the pinned bytes
    INSTALL_PINS_MISMATCH = "INSTALL_PINS_MISMATCH"            # an attested field differs from the pins (another skill)
    INSTALL_BAD_IMAGE = "INSTALL_BAD_IMAGE"                    # the pinned image is not a skill image of the pinned root
    INSTALL_DEST_EXISTS = "INSTALL_DEST_EXISTS"                # the destination exists and is not an empty directory
    INSTALL_DEST_IN_STATE = "INSTALL_DEST_IN_STATE"            # the destination is inside the deployment state directory
    INSTALL_DEST_IN_REPOSITORY = "INSTALL_DEST_IN_REPOSITORY"  # the destination is inside a git repository
    INSTALL_FAILED = "INSTALL_FAILED"                          # copying, renaming or recording the installation failed
    INSTALLED_ROOT_MISMATCH = "INSTALLED_ROOT_MISMATCH"        # the attestation records another installed root
    INSTALL_INPUT_IN_TREE = "INSTALL_INPUT_IN_TREE"            # the attestation or the pins lie inside the installed tree


# -- the pins ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkillPins:
    """The ``[skill]`` table of a deployment's pins, exactly as `attest promote` writes it."""

    name: str
    inventory: str
    root: str
    source_repository: str
    source_revision: str
    installer_repository: str
    installer_revision: str
    attestation: str
    provenance: str
    #: The pins file this was read from (resolved), so verifiers can refuse one inside a tree.
    path: str | None = None

    @classmethod
    def from_doc(cls, doc: Mapping[str, object], where: str, *, path: str | None = None) -> SkillPins:
        """Validate the parsed pins document; every problem is ``BAD_PINS`` (exit 2).

        Raises:
            InputError: ``BAD_PINS`` (no ``[skill]`` table, missing or unknown fields, a value
                that is not a non-empty string, a bad build name, identity, SHA or root name).
        """
        def bad(detail: str) -> InputError:
            return InputError(BuildCode.BAD_PINS, detail, where)

        table = doc.get("skill")
        if not isinstance(table, dict):
            raise bad("the pins have no [skill] table (run `attest promote` first)")
        missing = [k for k in _PIN_FIELDS if k not in table]
        unknown = sorted(set(table) - set(_PIN_FIELDS))
        if missing or unknown:
            raise bad(f"[skill]: missing {missing}, unknown {unknown}")
        values: dict[str, str] = {}
        for key in _PIN_FIELDS:
            value = table[key]
            if not isinstance(value, str) or not value or value != value.strip() or not value.isprintable():
                raise bad(f"skill.{key} must be a non-empty printable string without surrounding spaces")
            values[key] = value
        if not _BUILD_NAME.match(values["name"]):
            raise bad(f"skill.name {values['name'][:100]!r} is not an input-addressed build name (<32 hex>-<recipe>)")
        for key in ("inventory", "attestation", "provenance"):
            if not _IDENTITY.match(values[key]):
                raise bad(f"skill.{key} is not sha256:<64 lowercase hex>")
        for key in ("source_revision", "installer_revision"):
            if not is_full_sha(values[key]):
                raise bad(f"skill.{key} {values[key][:80]!r} is not a full 40- or 64-hex lowercase object id")
        problem = check_name(values["root"])
        if problem is not None:
            raise bad(f"skill.root: {problem[1]}")
        return cls(**values, path=path)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SkillPins:
        """Read and validate the pins file at ``path`` (its resolved path is kept in ``path``).

        Raises:
            InputError: ``UNREADABLE`` / ``TOO_LARGE``; ``BAD_PINS`` (see :meth:`from_doc`).
        """
        name = os.fspath(path)
        return cls.from_doc(parse_pins(read_bounded(name, what="pins file", max_bytes=MAX_PINS_BYTES), name), name,
                            path=os.path.realpath(name))


# -- the predicate ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InstallationClaim:
    """A parsed ``https://attest.dev/installation/v1`` predicate, of a build or of an installation.

    ``installed_root`` is None for a build (the tree is the store image, whose ``root`` is its
    top directory) and the absolute installed root for an installation (``inventory`` is then
    the tree below that root).
    """

    name: str
    inputs_digest: str
    installer_repository: str
    installer_revision: str
    source_repository: str
    source_revision: str
    source_tree: str
    subtree: str
    subtree_tree: str
    root: str
    installed_root: str | None
    inventory: Inventory

    @classmethod
    def from_statement(cls, doc: Mapping[str, object], *, installed: bool) -> InstallationClaim:
        """Strictly parse a verified (or digest-pinned) statement; every problem is ``BAD_PREDICATE``.

        The statement must have the installation predicate type and one subject whose digest is
        the identity of the inventory it carries (:func:`attest.attestation.tree_inventory`).

        Raises:
            VerificationError: ``BAD_PREDICATE`` for every field problem, and the codes of
                :func:`attest.attestation.tree_inventory` (``BAD_PREDICATE_TYPE``,
                ``NO_SUBJECT``, ``EXTRA_SUBJECT``, ``BAD_DIGEST``, ``SUBJECT_MISMATCH``).
        """
        def bad(detail: str) -> VerificationError:
            return VerificationError(AttestationCode.BAD_PREDICATE, detail)

        inventory = tree_inventory(doc, INSTALLATION_PREDICATE)
        pred = doc["predicate"]
        if not isinstance(pred, dict):  # tree_inventory read its inventory: never reached
            raise bad("the predicate is not an object")
        want = _BUILD_FIELDS | {"installed_root"} if installed else _BUILD_FIELDS
        if set(pred) != want:
            raise bad(f"installation predicate fields {sorted(pred)} are not exactly {sorted(want)}")
        installer, source = pred["installer"], pred["source"]
        if not isinstance(installer, dict) or set(installer) != _INSTALLER_FIELDS:
            raise bad(f"installer must hold exactly {sorted(_INSTALLER_FIELDS)}")
        if not isinstance(source, dict) or set(source) != _SOURCE_FIELDS:
            raise bad(f"source must hold exactly {sorted(_SOURCE_FIELDS)}")
        strings = {"name": pred["name"], "inputs_digest": pred["inputs_digest"], "root": pred["root"],
                   "installer.repository": installer["repository"], "installer.revision": installer["revision"],
                   **{f"source.{k}": v for k, v in source.items()}}
        for key, value in strings.items():
            if not isinstance(value, str) or (key != "source.subtree" and not value):
                raise bad(f"{key} is not a non-empty string")
        if not _HEX64.match(pred["inputs_digest"]):
            raise bad("inputs_digest is not 64 lowercase hex digits")
        for key in ("installer.revision", "source.revision", "source.tree", "source.subtree_tree"):
            if not is_full_sha(strings[key]):
                raise bad(f"{key} {strings[key][:80]!r} is not a full object id")
        if check_name(pred["root"]) is not None:
            raise bad(f"root {pred['root'][:80]!r} is not a single safe name")
        installed_root = pred.get("installed_root")
        if installed and (not isinstance(installed_root, str) or not os.path.isabs(installed_root)
                          or os.path.normpath(installed_root) != installed_root or installed_root == "/"):
            raise bad("installed_root is not a normalized absolute path")
        return cls(pred["name"], pred["inputs_digest"], installer["repository"], installer["revision"], source["repository"],
                   source["revision"], source["tree"], source["subtree"], source["subtree_tree"], pred["root"],
                   installed_root, inventory)

    def to_predicate(self) -> dict[str, object]:
        """The installation predicate this claim parses from (``installed_root`` only when set).

        Raises:
            Nothing: it only reads fields validated when the claim was built.
        """
        out: dict[str, object] = {
            "name": self.name,
            "inputs_digest": self.inputs_digest,
            "installer": {"repository": self.installer_repository, "revision": self.installer_revision},
            "source": {"repository": self.source_repository, "revision": self.source_revision, "tree": self.source_tree,
                       "subtree": self.subtree, "subtree_tree": self.subtree_tree},
            "root": self.root,
            "inventory": self.inventory.to_json(),
        }
        if self.installed_root is not None:
            out["installed_root"] = self.installed_root
        return out


def check_claim(claim: InstallationClaim, pins: SkillPins) -> list[Finding]:
    """Every field in which an attested skill differs from the pinned one (pure; [] when it is the pinned skill)."""
    pairs = (
        ("name", claim.name, pins.name),
        ("root", claim.root, pins.root),
        ("installer.repository", claim.installer_repository, pins.installer_repository),
        ("installer.revision", claim.installer_revision, pins.installer_revision),
        ("source.repository", claim.source_repository, pins.source_repository),
        ("source.revision", claim.source_revision, pins.source_revision),
    )
    return [Finding(InstallCode.INSTALL_PINS_MISMATCH, None, f"{field}: the attestation says {got!r}, the pins say {want!r}")
            for field, got, want in pairs if got != want]


def installed_inventory(image: Inventory, root: str) -> tuple[Inventory, int]:
    """The inventory below ``root`` of a skill image, and the root directory's mode (pure).

    A skill image (:func:`attest.builder._skill.expected_skill_inventory`) holds the directory
    ``root`` and everything else below it; anything else is ``INSTALL_BAD_IMAGE``.
    """
    if not image.entries or image.entries[0].path != root or image.entries[0].type is not EntryType.DIR:
        raise VerificationError(InstallCode.INSTALL_BAD_IMAGE, f"the image's first entry is not the directory {root!r}")
    prefix = root + "/"
    outside = [e.path for e in image.entries[1:] if not e.path.startswith(prefix)]
    if outside:
        raise VerificationError(InstallCode.INSTALL_BAD_IMAGE, f"the image holds {count(len(outside), 'entry')} outside {root!r}", outside[0])
    below = [dataclasses.replace(e, path=e.path[len(prefix):]) for e in image.entries[1:]]
    return Inventory.from_entries(below, image.ignore), image.entries[0].mode


# -- where an installation may go -------------------------------------------------------------

FileId = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Ancestor:
    """One resolved directory at or above a path, and what marks it as part of a git repository."""

    path: str
    ident: FileId
    has_dotgit: bool  # it holds a ``.git`` entry: a work tree (or a gitfile pointing at a git directory)
    is_git_dir: bool  # it is itself a git directory (HEAD, objects/, refs/: git's own test), bare or not


def _inside(path: str, root: str) -> bool:
    """Whole-component containment of two normalized absolute paths (never a string prefix)."""
    p, r = Path(path).parts, Path(root).parts
    return p[: len(r)] == r


def destination_problem(dest: str, ancestors: Sequence[Ancestor], state: str, state_ident: FileId | None) -> Finding | None:
    """Why an installation may not go to ``dest``, or None (pure).

    ``dest`` is the resolved destination, ``ancestors`` its resolved parent and each directory
    above it up to ``/``, ``state`` the resolved state directory and ``state_ident`` its
    ``(st_dev, st_ino)``. Inside the state directory by path, or through another path to it
    (one of the ancestors *is* the state directory: a bind mount), is refused: the store, the
    keys and the attestations live there. Inside a git repository is refused: the installed
    Skill is authenticated as deployment state and must not be repository content.
    """
    if _inside(dest, state) or (state_ident is not None and any(a.ident == state_ident for a in ancestors)):
        return Finding(InstallCode.INSTALL_DEST_IN_STATE, dest, f"the destination is inside the state directory {state}")
    for a in ancestors:
        if a.has_dotgit or a.is_git_dir:
            what = "the git directory" if a.is_git_dir else "the work tree"
            return Finding(InstallCode.INSTALL_DEST_IN_REPOSITORY, dest, f"the destination is inside {what} of a git repository at {a.path}")
    return None


def _ancestors(start: str) -> list[Ancestor]:
    out: list[Ancestor] = []
    at = start
    while True:
        st = os.stat(at)
        is_git_dir = (os.path.isfile(os.path.join(at, "HEAD")) and os.path.isdir(os.path.join(at, "objects"))
                      and os.path.isdir(os.path.join(at, "refs")))
        out.append(Ancestor(at, (st.st_dev, st.st_ino), os.path.lexists(os.path.join(at, ".git")), is_git_dir))
        parent = os.path.dirname(at)
        if parent == at:
            return out
        at = parent


@dataclass(frozen=True, slots=True)
class Destination:
    parent: str  # resolved parent directory
    name: str  # the installed root's own name
    exists: bool  # an empty directory is there (and is replaced)

    @property
    def installed_root(self) -> str:
        return os.path.join(self.parent, self.name)


def installed_root_of(dest: str | os.PathLike[str]) -> str:
    """The exact installed root recorded for ``dest``: its resolved parent joined with its own name.

    The last component is never resolved (a symlink there is refused, not followed), so the root
    recorded is a real directory path whatever spelling of it the user gave.

    Raises:
        InputError: ``BAD_OUTPUT_PATH`` when the last component is not a safe name.
    """
    given = os.path.abspath(os.fspath(dest))
    name = os.path.basename(given)
    if check_name(name) is not None:
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"{name!r} is not a name an installed root can have", os.fspath(dest))
    return os.path.join(os.path.realpath(os.path.dirname(given)), name)


def _destination(dest: str | os.PathLike[str], state: str) -> Destination:
    """Step 2: resolve and judge the destination (nothing is created)."""
    root = installed_root_of(dest)
    parent, name = os.path.split(root)
    if not os.path.isdir(parent):
        why = "does not exist" if not os.path.lexists(parent) else "is not a directory"
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"the destination's parent directory {why}", os.fspath(dest))
    try:
        sst = os.stat(state)
        state_ident: FileId | None = (sst.st_dev, sst.st_ino)
    except OSError:
        state_ident = None
    problem = destination_problem(root, _ancestors(parent), os.path.realpath(state), state_ident)
    if problem is not None:
        raise InputError(findings=[problem])  # where to install is the operator's choice: bad usage, exit 2
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return Destination(parent, name, False)
    if stat.S_ISLNK(st.st_mode):
        raise InputError(InstallCode.INSTALL_DEST_EXISTS, "the destination is a symbolic link; an installation is never "
                                "written through one", root)
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(InstallCode.INSTALL_DEST_EXISTS, "the destination exists and is not a directory", root)
    try:
        entries = os.listdir(root)
    except OSError as e:
        raise InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot list the existing destination: {e.strerror}", root) from e
    if entries:
        raise InputError(InstallCode.INSTALL_DEST_EXISTS, "the destination exists and is not empty; remove it to "
                                "install again (an installation never merges into or overwrites files)", root)
    return Destination(parent, name, True)


# -- the promoted skill -----------------------------------------------------------------------


def pinned_build_claim(state: str, pins: SkillPins) -> InstallationClaim:
    """Step 3: the promoted skill's build attestation, authenticated by its pinned digest, equal to the pins."""
    path = os.path.join(state, "builds", f"{pins.name}.skill.json")
    if not os.path.lexists(path):
        raise VerificationError(InstallCode.INSTALL_SKILL_MISSING, "the state directory holds no build attestation of the pinned "
                                "skill (promote it into this state directory first)", path)
    data = read_bounded(path, what="skill build attestation", max_bytes=MAX_ATTESTATION_BYTES)
    digest = sha256_of(data)
    if digest != pins.attestation:
        raise VerificationError(InstallCode.INSTALL_ATTESTATION_MISMATCH, f"the build attestation is {digest}; the pins name "
                                f"{pins.attestation}", path)
    # The bytes are the pinned ones: promotion verified their signatures under the release policy
    # before it wrote this digest. Only their structure is checked here.
    try:
        doc = loads_strict(data, what="skill build attestation", max_bytes=MAX_ATTESTATION_BYTES, max_depth=16)
        envelope = Envelope.from_json(doc["dsseEnvelope"] if isinstance(doc, dict) and "mediaType" in doc else doc)
        claim = InstallationClaim.from_statement(parse_statement(envelope.payload), installed=False)
    except (InputError, KeyError) as e:
        raise VerificationError(InstallCode.INSTALL_PINS_MISMATCH, "the pinned build attestation does not parse as a skill "
                                "build attestation", path) from e
    findings = check_claim(claim, pins)
    if claim.inventory.identity != pins.inventory:
        findings.append(Finding(InstallCode.INSTALL_PINS_MISMATCH, None, f"inventory: the attestation says {claim.inventory.identity}, "
                                f"the pins say {pins.inventory}"))
    if findings:
        raise VerificationError(findings=[dataclasses.replace(f, path=path) for f in findings])
    return claim


# -- installing -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InstallResult:
    installed_root: str
    attestation: str
    attestation_digest: str
    image: str  # the promoted image's identity (the pinned inventory)
    claim: InstallationClaim
    promotion_log: AcceptedLog | None = None  # the pins' log as checked and remembered (head None: the pins have no log)

    @property
    def inventory(self) -> Inventory:
        return self.claim.inventory

    def to_json(self) -> dict[str, object]:
        """The ``--json`` object of ``attest install skill``.

        Raises:
            Nothing: it only reads fields.
        """
        c = self.claim
        return {
            "ok": True,
            "installed_root": self.installed_root,
            "attestation": self.attestation,
            "attestation_digest": self.attestation_digest,
            "skill": {"name": c.name, "identity": self.image, "root": c.root},  # the promoted image's identity
            "inventory": {"identity": c.inventory.identity, "entries": len(c.inventory.entries)},
            "installer": {"repository": c.installer_repository, "revision": c.installer_revision},
            "source": {"repository": c.source_repository, "revision": c.source_revision},
            "promotion_log": self.promotion_log.to_json() if self.promotion_log is not None else None,
        }


_PATH_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG})


def _create_failure(e: OSError, where: str) -> InputError | EnvironmentFailure:
    if e.errno in _PATH_ERRNOS:
        return InputError(CommonCode.BAD_OUTPUT_PATH, f"cannot create the installation there: {e.strerror}", where)
    return EnvironmentFailure(InstallCode.INSTALL_FAILED, f"cannot create the installation: {e.strerror}", where)


def _copy_into(parent_fd: int, tmp: str, source: str, installed: Inventory, root_mode: int, where: str) -> None:
    """Step 5: the attested entries of ``source`` as new inodes under ``parent/tmp``, then verified there."""
    fd = os.open(tmp, O_DIR, dir_fd=parent_fd)
    try:
        # The freeze layer's copier without a seal: the installation is writable by design.
        findings, _ = materialize(source, installed, fd, _Unsealed())  # type: ignore[arg-type]
        if findings:
            raise VerificationError(findings=findings)
        os.fchmod(fd, root_mode)
    finally:
        os.close(fd)
    # The decisive check reads the copy itself, never the image it came from.
    findings = check_tree(where, installed)
    if findings:
        raise VerificationError(findings=findings)


def install_skill(pins_path: str | os.PathLike[str], state_dir: str | os.PathLike[str], dest: str | os.PathLike[str],
                  signer: Signer | Sequence[Signer], *, fmt: str = "dsse", policy: Policy | None = None,
                  log_checkpoint: str | None = None) -> InstallResult:
    """Install the pinned, promoted skill at ``dest`` and sign its installation attestation; see the module docstring.

    ``signer`` is one key or several (one DSSE envelope with one signature per key). ``policy``
    (TRUST) verifies the promotion log beside the pins, which must end at exactly the pins read
    and continue the checkpoint ``state_dir`` remembers for them, or ``log_checkpoint``
    (``SEQ:sha256:HEX``, a first use's); pins with a log need it. The head is remembered once
    every check passed, before the installation is published.

    Raises:
        InputError: (1) ``UNREADABLE``, ``BAD_PINS``, ``USAGE`` (a log and no ``policy``, a
            malformed ``log_checkpoint``); (2) ``BAD_OUTPUT_PATH``,
            ``INSTALL_DEST_EXISTS`` (also when it appears meanwhile); (6) the signer's
            ``SIGNING_FAILED``.
        VerificationError: (1) the promotion log's codes (``PROMOTION_LOG_*``:
            ``PROMOTION_LOG_ROLLBACK``, ``PROMOTION_LOG_FORK``, ``PROMOTION_LOG_PINS_MISMATCH``, ...);
            (2) ``INSTALL_DEST_IN_STATE``, ``INSTALL_DEST_IN_REPOSITORY``;
            (3) ``INSTALL_SKILL_MISSING``, ``INSTALL_ATTESTATION_MISMATCH``,
            ``INSTALL_PINS_MISMATCH``, ``BAD_PREDICATE``; (4) ``INSTALL_BAD_IMAGE`` and the
            store's ``NOT_IN_STORE`` / ``IMAGE_CHANGED``; (5) the inventory diff's codes.
        EnvironmentFailure: ``INSTALL_FAILED`` (copy, rename or attestation write failed;
            a failure leaves neither the tree nor the attestation).
    """
    # 1. The pins, read once: the log beside them must end at exactly these bytes and continue what this state accepted.
    name = os.fspath(pins_path)
    pins_data = read_bounded(name, what="pins file", max_bytes=MAX_PINS_BYTES)
    pins = SkillPins.from_doc(parse_pins(pins_data, name), name, path=os.path.realpath(name))
    state = os.path.abspath(os.fspath(state_dir))
    log = check_promotion_log(name, pins_data, policy, state, given=log_checkpoint)
    # 2. The destination.
    target = _destination(dest, state)
    # 3. The promoted skill, as promotion attested it.
    built = pinned_build_claim(state, pins)
    # 4. The promoted image: seal, every byte, seal.
    image = Store(state).get(pins.inventory)
    installed, root_mode = installed_inventory(built.inventory, pins.root)
    claim = dataclasses.replace(built, installed_root=target.installed_root, inventory=installed)
    # 5. A private sibling, copied and verified.
    tmp = f".{target.name}.attest-install-{secrets.token_hex(8)}"
    tmp_path = os.path.join(target.parent, tmp)
    out = os.path.join(state, INSTALLATIONS,
                       f"{claim.name}-{hashlib.sha256(target.installed_root.encode()).hexdigest()[:16]}.json")
    parent_fd = open_root(target.parent)
    renamed = False
    try:
        try:
            os.mkdir(tmp, 0o700, dir_fd=parent_fd)
        except OSError as e:
            raise _create_failure(e, os.fspath(dest)) from e
        try:
            _copy_into(parent_fd, tmp, f"{image.path}/{pins.root}", installed, root_mode, tmp_path)
            # 6. Signed before anything is visible.
            data = sign_statement(statement([subject(claim.name, installed.digest_hex)], INSTALLATION_PREDICATE,
                                            claim.to_predicate()), signer, fmt=fmt)
            # Every check passed: this state remembers the log's head (a later rollback or fork is refused).
            remember_log(log, state)
            # 7. Publish: the tree, then its attestation; a failure of the second undoes the first.
            try:
                os.rename(tmp, target.name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                    raise InputError(InstallCode.INSTALL_DEST_EXISTS, "the destination appeared while the skill was "
                                            "being installed; nothing was changed", target.installed_root) from e
                raise EnvironmentFailure(InstallCode.INSTALL_FAILED, f"cannot rename the installation into place: {e.strerror}",
                                         target.installed_root) from e
            renamed = True
            try:
                os.makedirs(os.path.dirname(out), mode=0o700, exist_ok=True)
                write_atomic(out, data, mode=0o444, what="installation attestation")
            except (OSError, InputError) as e:
                raise EnvironmentFailure(InstallCode.INSTALL_FAILED, f"cannot write the installation attestation ({e}); the "
                                         "installation was removed again", out) from e
        except BaseException as failure:
            try:
                if renamed:
                    # Take the tree back out of sight under the private name, then remove it.
                    os.rename(target.name, tmp, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
                remove_tree(parent_fd, tmp)
            except OSError as e:  # keep the reason the installation failed; say what is left
                left = target.installed_root if renamed else tmp_path
                failure.add_note(f"the partial installation {left} could not be removed ({e.strerror}); remove it by hand")
            raise
    finally:
        os.close(parent_fd)
    return InstallResult(target.installed_root, out, sha256_of(data), image.identity, claim, log)


# -- verifying an installation ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VerifiedInstallation:
    """An installed tree that matched its installation attestation, under a trust policy, when it was checked.

    The tree stays writable: only a frozen copy verified against ``claim.inventory`` after its
    seal may be used (`attest bootstrap` step 1).
    """

    claim: InstallationClaim
    attestation_digest: str
    signers: tuple[str, ...]

    @property
    def inventory(self) -> Inventory:
        return self.claim.inventory


def verify_installation(attestation: str | os.PathLike[str], policy: Policy, dest: str | os.PathLike[str],
                        pins: SkillPins) -> VerifiedInstallation:
    """Raise unless the tree at ``dest`` is the pinned skill exactly as the signed attestation installed it.

    1. the trust policy's inputs, the attestation and the pins file lie outside ``dest``;
    2. the attestation verifies under ``policy`` (DSSE or bundle, threshold of trusted signers);
    3. it is an installation statement: one subject, the identity of the inventory it carries;
    4. its installer and source repositories and SHAs, skill name and root equal the pins;
    5. its installed root is exactly ``dest`` (:func:`installed_root_of`);
    6. ``dest`` matches the closed inventory: no missing, extra, retyped, re-moded or changed entry,
       no link, hard link or special file.

    Raises:
        VerificationError: (1) ``POLICY_IN_TREE``, ``INSTALL_INPUT_IN_TREE``; (2) every code
            of :func:`attest.attestation.verify_attestation_bytes`; (3) ``BAD_PREDICATE`` and
            the tree-statement codes; (4) ``INSTALL_PINS_MISMATCH``; (5)
            ``INSTALLED_ROOT_MISMATCH``; (6) the inventory diff's codes (``MISSING``,
            ``EXTRA``, ``DIGEST_MISMATCH``, ``SYMLINK``, ``HARDLINK``, ...).
        InputError: ``BAD_OUTPUT_PATH`` for ``dest``; the attestation's ``UNREADABLE`` /
            ``TOO_LARGE``; ``UNREADABLE`` for a policy input that cannot be examined.
    """
    root = installed_root_of(dest)
    # 1.
    check_policy_outside(policy, root)
    try:
        rst = os.stat(root)
        root_ident: FileId | None = (rst.st_dev, rst.st_ino)
    except OSError:
        root_ident = None
    for what, source in (("installation attestation", os.fspath(attestation)), ("pins file", pins.path)):
        if source is None:
            continue
        real = os.path.realpath(source)
        inside = _inside(real, root) or (root_ident is not None and os.path.isdir(os.path.dirname(real))
                                         and any(a.ident == root_ident for a in _ancestors(os.path.dirname(real))))
        if inside:
            raise VerificationError(InstallCode.INSTALL_INPUT_IN_TREE, f"the {what} must lie outside the installed tree", source)
    # 2.
    data = read_bounded(attestation, what="installation attestation", max_bytes=MAX_ATTESTATION_BYTES)
    verified = verify_attestation_bytes(data, policy)
    # 3.
    claim = InstallationClaim.from_statement(verified.statement, installed=True)
    # 4. + 5.
    findings = check_claim(claim, pins)
    if claim.installed_root != root:
        findings.append(Finding(InstallCode.INSTALLED_ROOT_MISMATCH, root, f"the attestation records the installed root "
                                f"{claim.installed_root!r}"))
    if findings:
        raise VerificationError(findings=findings)
    # 6. The resolved root, walked component by component (a link swapped in since is refused).
    findings = check_tree(root, claim.inventory)
    if findings:
        raise VerificationError(findings=findings)
    return VerifiedInstallation(claim, verified.attestation_digest, verified.signers)


__all__ = [
    "Ancestor",
    "InstallCode",
    "InstallResult",
    "InstallationClaim",
    "SkillPins",
    "VerifiedInstallation",
    "check_claim",
    "destination_problem",
    "install_skill",
    "installed_inventory",
    "installed_root_of",
    "pinned_build_claim",
    "verify_installation",
]
