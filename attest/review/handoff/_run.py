"""Running the review step from the four frozen images of a verified handoff (issue 12, item 4).

1. The handoff verifies under TRUST (:func:`~attest.review.handoff.verify_handoff`).
2. Each of the four images is taken from the store and verified (seal, every byte, seal) by
   :func:`attest.freeze.run_from_images`, under the store's shared lock; then, before anything
   runs, each must be the handoff's image exactly: identity, store path and backend, and the
   procedure bundle's files exactly the handoff's (:func:`decide_images`, pure).
3. The reviewer runs with ``attest exec``'s clean environment: ``ATTEST_IMAGE_BOOTSTRAP``,
   ``ATTEST_IMAGE_RUNTIME``, ``ATTEST_IMAGE_BASE`` and ``ATTEST_IMAGE_PROCEDURE``, working
   directory the base snapshot, **confined** (:func:`confine_reviewer`) as a build step is: new
   mount, PID, IPC, UTS and (unless ``network``) network namespaces, a uid no account or
   process has, no capabilities, no_new_privs, and a root holding only the system paths, the
   runtime's interpreter (from its verified attestation), ``readonly``, the private run
   directory and the four images, each bound from the descriptor of the directory that was
   verified (so a path swapped afterwards is never what the reviewer reads). Every process it
   starts dies with it. After the handoff the procedure bundle is the only source of Skill
   bytes: the installed Skill, the worktree, the head, the deployment's keys and state are not
   in its root.
4. Its standard output must be the provider-neutral result (:func:`parse_result`); it is written
   atomically to the result file only when it parses, and every image is re-checked after the
   command (a change while it ran fails closed, whatever it printed).

    >>> run = run_review_step("handoff.json", load_policy("trust.toml"), "/var/lib/attest",
    ...                       ["/bin/sh", "-c", 'exec "$ATTEST_IMAGE_RUNTIME/bin/attest" review stand-in'], out="result.json")
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import EnvironmentFailure, Finding, VerificationError
from ._codes import HandoffCode
from ._handoff import IMAGE_NAMES, Handoff, verify_handoff
from ._result import MAX_RESULT_BYTES, ReviewResult, parse_result


def decide_images(handoff: Handoff, images: Mapping[str, Any]) -> list[Finding]:
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
class Confinement:
    """How the reviewer ran: confined (and with which uid and network), or unconfined on request.

    Raises:
        Nothing.
    """

    confined: bool
    network: str  # "none" (its own empty network namespace) or "host"
    uid: int | None = None
    readonly: tuple[str, ...] = ()
    mode: str = "rootful"  # "rootful": a uid no account or process has; "rootless": the caller's uid in a user namespace

    def to_json(self) -> dict[str, Any]:
        if not self.confined:
            return {"confined": False, "why": "--unsafe-unconfined: the reviewer ran as the caller, seeing the host"}
        doc = {"confined": True, "mode": self.mode, "network": self.network, "uid": self.uid, "readonly": list(self.readonly),
               "namespaces": [*(["user"] if self.mode == "rootless" else []), "mount", "pid", "ipc", "uts",
                              *(["net"] if self.network == "none" else [])],
               "capabilities": "none, no_new_privs"}
        if self.mode == "rootless":
            doc["uid_note"] = "the caller's own uid, mapped into the user namespace: processes of that uid outside can see it"
        return doc


MAX_RUNTIME_ATTESTATION = 64 << 20


#: Where an interpreter of a runtime never lives, and what binding it would hand the reviewer (sockets, devices, scratch).
FORBIDDEN_INTERPRETER_ROOTS = ("/run", "/var/run", "/tmp", "/var/tmp", "/dev", "/proc", "/sys")
_EXE_NAME = re.compile(r"python[0-9.]*\Z")
_LIB_NAME = re.compile(r"libpython[0-9]+\.[0-9]+[a-z]*\.so(?:\.[0-9]+)*\Z")


def decide_interpreter_paths(interp: Any, *, forbidden: Sequence[str]) -> tuple[list[Finding], tuple[str, ...]]:
    """Which host paths running the runtime's interpreter needs, from its attested identity (pure).

    Exactly its binary, its standard library directory (``.../lib/pythonX.Y``, the attested
    version) and each libpython file, never a parent directory: whatever else a runtime
    attestation names, the reviewer's root gains nothing more. A path that is not absolute and
    normal, not of its kind's name, or under ``forbidden`` is refused.

    Raises:
        Nothing: a refusal is a returned ``HANDOFF_IMAGE_MISMATCH`` finding (with no paths).
    """
    def bad(detail: str) -> tuple[list[Finding], tuple[str, ...]]:
        return [Finding(HandoffCode.HANDOFF_IMAGE_MISMATCH, None, f"the runtime attestation's interpreter: {detail}")], ()

    if not isinstance(interp, dict):
        return bad("it names none")
    exe, stdlib, libs, version = interp.get("executable"), interp.get("stdlib"), interp.get("libpython"), interp.get("version")
    if not (isinstance(version, str) and re.match(r"[0-9]+\.[0-9]+(\.|\Z)", version)):
        return bad("no version")
    short = ".".join(version.split(".")[:2])
    if not isinstance(libs, list) or not all(isinstance(x, dict) and isinstance(x.get("path"), str) for x in libs):
        return bad("libpython is not a list of paths")
    paths = [("executable", exe), ("stdlib", stdlib), *(("libpython", x["path"]) for x in libs)]
    for kind, path in paths:
        if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) != path or path == "/":
            return bad(f"{kind} {str(path)[:200]!r} is not an absolute, normal path")
        if any(path == f or path.startswith(f.rstrip("/") + "/") for f in forbidden):
            return bad(f"{kind} {path!r} lies under {', '.join(forbidden)}, where no interpreter is installed")
        name = os.path.basename(path)
        ok = {"executable": bool(_EXE_NAME.match(name)), "libpython": bool(_LIB_NAME.match(name)),
              "stdlib": name == f"python{short}" and os.path.basename(os.path.dirname(path)) in ("lib", "lib64")}[kind]
        if not ok:
            return bad(f"{kind} {path!r} is not named as a Python {short} {kind} is")
    return [], tuple(p for _, p in paths if isinstance(p, str))


def runtime_interpreter_roots(handoff: Handoff, policy: Any, state_dir: str) -> tuple[str, ...]:
    """The host paths the runtime image's interpreter needs (:func:`decide_interpreter_paths`), from its verified attestation.

    Read from the runtime attestation the handoff names (``STATE/builds/<name>.runtime.json``,
    its digest equal to the handoff's, verified under TRUST), never from the image or the host.

    Raises:
        VerificationError: ``HANDOFF_IMAGE_MISMATCH`` when the attestation is not the handoff's
            or its interpreter paths are refused; the attestation layer's codes when it does not verify.
    """
    from ..._fs import read_bounded
    from ...attestation import RUNTIME_PREDICATE, verify_attestation_bytes

    path = os.path.join(state_dir, "builds", f"{handoff.runtime_name}.runtime.json")
    data = read_bounded(path, what="runtime attestation", max_bytes=MAX_RUNTIME_ATTESTATION)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != handoff.runtime_attestation_digest:
        raise VerificationError(HandoffCode.HANDOFF_IMAGE_MISMATCH, f"the runtime attestation is {digest}, the handoff's "
                                f"{handoff.runtime_attestation_digest}", path)
    verified = verify_attestation_bytes(data, policy)
    interp = verified.statement.get("predicate", {}).get("interpreter") if verified.predicate_type == RUNTIME_PREDICATE else None
    problems, roots = decide_interpreter_paths(interp, forbidden=(*FORBIDDEN_INTERPRETER_ROOTS, state_dir))
    if problems:
        raise VerificationError(findings=[Finding(f.code, path, f.detail) for f in problems])
    return roots


def verify_can_confine(euid: int, *, unsafe_unconfined: bool, rootless: Callable[[], str | None] | None = None) -> None:
    """Raise unless the reviewer can be confined by a process of ``euid``, or the caller asked for no confinement.

    Root confines it rootful (a uid of its own); anyone else rootless (a user namespace mapping
    only the caller, :func:`confine_reviewer`), where ``rootless()`` returns None; otherwise it
    returns why not. Its default, :func:`attest.build._sandbox.rootless_problem`, asks this
    machine, and is called only for a non-root caller who did not pass ``unsafe_unconfined``;
    given, the decision is pure.

    Raises:
        EnvironmentFailure: ``REVIEWER_NOT_CONFINED`` for a non-root caller without ``unsafe_unconfined``
            where no rootless confinement can be made (no unprivileged user namespaces).
    """
    if euid == 0 or unsafe_unconfined:
        return
    from ...build._sandbox import rootless_problem

    problem = (rootless or rootless_problem)()
    if problem is not None:
        raise EnvironmentFailure(HandoffCode.REVIEWER_NOT_CONFINED, "the reviewer cannot be confined here: without root "
                                 f"that needs a user namespace, and {problem}; pass --unsafe-unconfined to run it as you, "
                                 "seeing the host")


_RUN_SUBDIRS = ("home", "tmp", "cache", "config", "data", "pycache")


def confine_reviewer(readonly: Sequence[str], *, network: bool) -> tuple[Any, list[int]]:
    """A ``confine`` callback for :func:`attest.freeze.run_from_images` and a list that receives the uid it picked.

    Each image is opened (``O_NOFOLLOW|O_DIRECTORY``) and must be the verified, sealed root (same
    device and inode as sealed) before its descriptor is bound read-only at its path. Root
    confines rootful: a uid of the reviewer's own (:func:`attest.build.pick_step_uid`), which
    the run directories are handed to. Anyone else confines rootless: the same root and
    namespaces inside a new user namespace that maps only the caller, so the reviewer runs as
    the caller (the uid recorded), who already owns the run directories; the images stay
    read-only to it because they are bound read-only, whoever owns them.

    Raises:
        Nothing itself. The callback raises ``VerificationError`` (``HANDOFF_IMAGE_MISMATCH``: an
        image path no longer leads to the sealed root), ``EnvironmentFailure``
        (``NETWORK_NOT_ISOLATED``: no free uid, or the confinement tools are missing), and
        ``OSError`` only from handing the run directories to the reviewer's uid.
    """
    from ..._safefs import O_DIR
    from ...build import confine_argv, give_to_uid, pick_step_uid

    picked: list[int] = []

    def confine(argv: Sequence[str], images: Mapping[str, Any], run_dir: str, cwd: str) -> tuple[list[str], list[int]]:
        rootless = os.geteuid() != 0
        uid = os.getuid() if rootless else pick_step_uid()
        picked.append(uid)
        writable = [f"{run_dir}/{sub}" for sub in _RUN_SUBDIRS]
        if not rootless:
            give_to_uid(writable, uid)
        fds: list[int] = []
        try:
            binds: list[tuple[int, str]] = []
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
                binds.append((fd, image.path))
            return confine_argv(argv, root_parent=run_dir, cwd=cwd, readonly=readonly, writable=writable, uid=uid,
                                network=network, fd_binds=binds, rootless=rootless), fds
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

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "handoff_digest": self.handoff.attestation_digest, "result": self.result_path,
                "result_digest": self.result_digest, "complete": self.result.complete, "confinement": self.confinement.to_json(),
                "findings": len(self.result.findings), "blocking": sum(f.blocking for f in self.result.findings),
                "images": {n: i.identity for n, i in self.handoff.images.items()}}


def run_review_step(
    handoff_path: str | os.PathLike[str],
    policy: Any,
    state_dir: str | os.PathLike[str],
    argv: Sequence[str],
    *,
    out: str | os.PathLike[str],
    pass_env: Sequence[str] = (),
    set_env: Mapping[str, str] | None = None,
    readonly: Sequence[str] = (),
    network: bool = False,
    unsafe_unconfined: bool = False,
) -> ReviewRun:
    """Verify the handoff, run ``argv`` from its four frozen images, write the parsed result to ``out``.

    Raises:
        InputError: unreadable handoff, bad command or environment (``BAD_EXEC_ENV``,
            ``ENV_REFUSED``), an unwritable ``out`` (``BAD_OUTPUT_PATH``).
        VerificationError: the handoff does not verify (``HANDOFF_*``, the attestation codes), an
            image is missing or changed (``NOT_IN_STORE``, ``IMAGE_*``, ``HANDOFF_IMAGE_MISMATCH``,
            ``IMAGE_CHANGED_DURING_EXEC``), or the output is not a result (``REVIEW_RESULT_INVALID``).
        EnvironmentFailure: the reviewer exited non-zero (``REVIEWER_FAILED``); it cannot be
            confined here (``REVIEWER_NOT_CONFINED``) and ``unsafe_unconfined`` was not given.
    """
    from ..._fs import write_atomic
    from ...freeze import run_from_images

    handoff = verify_handoff(handoff_path, policy)  # (1)
    state = os.path.abspath(os.fspath(state_dir))
    confine: Any = None
    picked: list[int] = []
    roots: tuple[str, ...] = ()
    verify_can_confine(os.geteuid(), unsafe_unconfined=unsafe_unconfined)
    if not unsafe_unconfined:
        from ...build import SYSTEM_PATHS

        roots = (*SYSTEM_PATHS, *runtime_interpreter_roots(handoff, policy, state), *(os.path.abspath(p) for p in readonly))
        confine, picked = confine_reviewer(roots, network=network)

    def require(images: Mapping[str, Any]) -> None:  # (2), under the store lock, before the reviewer runs
        problems = decide_images(handoff, images)
        if problems:
            raise VerificationError(findings=problems)

    fd = os.memfd_create("attest-review-result", os.MFD_CLOEXEC)
    try:
        refs = {name.upper(): handoff.images[name].identity for name in IMAGE_NAMES}
        rc = run_from_images(state, refs, argv, cwd_image="BASE", pass_env=pass_env, set_env=set_env, stdout=fd,
                             before=require, confine=confine)  # (3)
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
    from ...build import readonly_roots

    confinement = Confinement(True, "host" if network else "none", picked[0] if picked else None, readonly_roots(roots),
                              "rootful" if os.geteuid() == 0 else "rootless") \
        if confine is not None \
        else Confinement(False, "host")
    return ReviewRun(handoff, result, path, "sha256:" + hashlib.sha256(canonical).hexdigest(), confinement)


def _canonical(doc: Any) -> bytes:
    from ..._json import canonical_bytes

    return canonical_bytes(doc)


__all__ = [
    "FORBIDDEN_INTERPRETER_ROOTS",
    "Confinement",
    "ReviewRun",
    "confine_reviewer",
    "decide_images",
    "decide_interpreter_paths",
    "run_review_step",
    "runtime_interpreter_roots",
    "verify_can_confine",
]
