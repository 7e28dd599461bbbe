"""`attest freeze`, `attest exec`, `attest store ls`, `attest store gc`."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Optional

import typer

from .._plural import count
from ..errors import AttestError, CommonCode, InputError, VerificationError
from ._app import (
    BackendOption,
    JsonOption,
    ReportedFailure,
    StateDirOption,
    argument,
    flag,
    json_input,
    new_group,
    option,
    print_json,
    progress_bar,
    state_to_read,
    state_to_write,
    working,
)

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.freeze +126 ms, attest.attestation +87 ms, attest._fs (its tempfile) +3 ms, over the app's own 60 ms (-X
# importtime after build_app(), median of 5).


def register(app: typer.Typer) -> None:
    store_app = new_group("store", "The content-addressed store of frozen images.")
    app.command("freeze")(freeze)
    app.command(
        "exec",
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    )(exec_)
    store_app.command("ls")(store_ls)
    store_app.command("gc")(store_gc)
    app.add_typer(store_app, name="store")


def freeze(
    source: Path = argument(metavar="SOURCE", help="The source tree (a candidate only: its bytes decide nothing)."),
    attestation: Path = option(..., "--attestation", metavar="FILE", help="The closed-tree attestation (DSSE envelope or bundle)."),
    policy: Path = option(..., "--policy", metavar="FILE", help="Trust policy (TOML), from outside SOURCE."),
    state_dir: Optional[Path] = StateDirOption,
    backend: Optional[str] = BackendOption,
    json_mode: bool = JsonOption,
) -> None:
    """Freeze SOURCE into the store: copy privately, seal, verify the frozen bytes against the attestation, publish."""
    from ..attestation import MAX_ATTESTATION_BYTES, load_policy  # lazy
    from ..freeze import freeze_attested, get_backend  # lazy

    get_backend(backend)  # an unknown backend is bad usage, before anything is read
    state = state_to_write(state_dir)  # freezing writes into the store: a missing state directory is created
    json_input(attestation, what="attestation", max_bytes=MAX_ATTESTATION_BYTES)
    pol = load_policy(policy)
    with progress_bar("verifying the frozen image", json_mode) as progress:
        image = freeze_attested(source, attestation, pol, state, backend=backend, progress=progress)
    if json_mode:
        print_json({"ok": True, **image.to_json(), "source_read": not image.reused})
    elif image.reused:
        print(f"reused {image.identity} ({image.backend}): {image.path}")
        print("  the stored image was verified byte for byte against the attestation; the source was not read")
    else:
        print(f"frozen {image.identity} ({image.backend}): {image.path}")


def parse_env_options(env: list[str]) -> tuple[list[str], dict[str, str]]:
    """``--env`` items as (names passed through, names set): ``NAME`` passes, ``NAME=VALUE`` sets; twice is an error."""
    from ..freeze import FreezeCode  # lazy

    passed: list[str] = []
    setting: dict[str, str] = {}
    for item in env:
        var, sep, value = item.partition("=")
        if var in setting or var in passed:
            raise InputError(FreezeCode.BAD_EXEC_ENV, "--env names this variable twice", var)
        if sep:
            setting[var] = value
        else:
            passed.append(var)
    return passed, setting


EnvOption = option(
    [],
    "--env",
    metavar="NAME[=VALUE]",
    help="NAME passes that variable through; NAME=VALUE sets it. Repeatable. Variables exec fixes (PATH, HOME, "
    "TMPDIR, ...) and those that load code or configuration (LD_*, PYTHON*, GIT_*, JAVA_TOOL_OPTIONS, ...) are refused.",
)


def exec_(
    command: list[str] = argument(metavar="CMD...", help="The command and its arguments (after --)."),
    image: list[str] = option(..., "--image", metavar="NAME=REF", help="REF: an image path printed by freeze, or its identity sha256:<hex>. Repeatable."),
    state_dir: Optional[Path] = StateDirOption,
    cwd: Optional[str] = option(None, "--cwd", metavar="NAME", help="Run in the image with this NAME (default: a private run directory)."),
    env: list[str] = EnvOption,
    json_mode: bool = JsonOption,
) -> None:
    """Run CMD from frozen, still-sealed store images only, in a clean environment; its exit status is passed through.

    As env(1) and timeout(1): 127 the command was not found, 126 it could not be executed, 125
    attest exec itself failed (a bad image or variable, an image that does not hold or changed);
    any other status is the command's own.
    """
    from ..freeze import FreezeCode  # lazy

    try:
        rc = _exec(command, image, state_dir, cwd, env)
    except AttestError as err:
        statuses = {str(FreezeCode.COMMAND_NOT_FOUND): 127, str(FreezeCode.COMMAND_NOT_EXECUTABLE): 126}
        status = statuses.get(str(err.findings[0].code), 125)
        raise ReportedFailure(err, exit_code=status) from err
    raise typer.Exit(code=rc)


_BARE_HEX = re.compile(r"[0-9a-fA-F]{16,}")


def _exec(command: list[str], image: list[str], state_dir: Optional[Path], cwd: Optional[str], env: list[str]) -> int:
    from ..freeze import FreezeCode, run_from_images  # lazy

    images: dict[str, str] = {}
    for item in image:
        name, sep, ref = item.partition("=")
        if not sep or not ref:
            raise InputError(FreezeCode.BAD_IMAGE_REF, "--image takes NAME=REF", item)
        if _BARE_HEX.fullmatch(ref):
            raise InputError(FreezeCode.BAD_IMAGE_REF, "an identity is written sha256:<hex>, not bare hex", item)
        if name in images:
            raise InputError(FreezeCode.BAD_IMAGE_REF, "the image name is given twice", name)
        images[name] = ref
    passed, setting = parse_env_options(env)
    state = state_to_read(state_dir, made_by="`attest freeze`")  # after the command line's own mistakes, before any lookup
    sys.stdout.flush()
    return run_from_images(state, images, command, cwd_image=cwd, pass_env=passed, set_env=setting)


def store_ls(
    state_dir: Optional[Path] = StateDirOption,
    check: bool = flag("--check", help="Also confirm each image's seal still holds."),
    json_mode: bool = JsonOption,
) -> None:
    """List the images in the store."""
    from ..freeze import Store  # lazy

    entries = Store(state_to_read(state_dir, made_by="`attest freeze` or `attest build`")).ls(check=check)
    broken = [f for e in entries for f in e.problems]
    if json_mode:
        doc = {"ok": not broken, "images": [e.to_json() for e in entries]}
        if broken:
            raise ReportedFailure(VerificationError(findings=broken), document={**doc, "errors": [f.to_json() for f in broken]})
        print_json(doc)
        return
    for e in entries:
        status = "" if not e.checked else ("  holds" if not e.problems else f"  BROKEN: {e.problems[0]}")
        print(f"{e.identity}  {e.backend or '?'}  {e.path}{status}")
    if broken:
        sys.stdout.flush()
        raise VerificationError(findings=broken)


def store_gc(
    state_dir: Optional[Path] = StateDirOption,
    keep: list[str] = option([], "--keep", metavar="IDENTITY", help="sha256:<hex> identity a pin refers to; never removed. Repeatable."),
    keep_file: Optional[Path] = option(None, "--keep-file", metavar="FILE", help="File of identities to keep, one per line ('#' comments)."),
    recent: float = option(7 * 24 * 3600, "--recent", metavar="SECONDS", min=0, help="Keep images frozen or run within this many seconds."),
    dry_run: bool = flag("--dry-run", help="Only report what would be removed."),
    json_mode: bool = JsonOption,
) -> None:
    """Remove images that no pin (--keep) or recent run refers to; clear flags only on what is removed.

    Also removes the staging interrupted freezes, runs and builds left (never a running build's), and lists it.
    """
    from .._fs import read_bounded  # lazy
    from ..freeze import Store  # lazy

    state = state_to_read(state_dir, made_by="`attest freeze` or `attest build`")
    kept = list(keep)
    if keep_file is not None:
        data = read_bounded(keep_file, what="keep file", max_bytes=16 * 1024 * 1024)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(CommonCode.UNREADABLE, "the keep file is not UTF-8", str(keep_file)) from e
        kept += [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]

    # Every kept image is verified (a pinned one that no longer holds is reported) and every removed one unsealed: seconds
    # on a deployment's store, so it says it is working, as the builds do.
    with working(f"{'checking' if dry_run else 'collecting'} the store of {state}", json_mode):
        result = Store(state).gc(keep=kept, recent=recent, dry_run=dry_run)
    if json_mode:
        doc = {"ok": not result.broken, **result.to_json()}
        if result.broken:  # the collection ran; a kept (pinned) image no longer holds: exit 1
            raise ReportedFailure(VerificationError(findings=result.broken),
                                  document={**doc, "errors": [f.to_json() for f in result.broken]})
        print_json(doc)
        return
    verb = "would remove" if dry_run else "removed"
    for ident in result.removed:
        print(f"{verb} {ident}")
    for path in result.staging:
        print(f"{verb} staging {path}")
    print(f"{verb} {count(len(result.removed), 'image')} and {len(result.staging)} leftover staging, kept {len(result.kept)}")
    if result.broken:
        sys.stdout.flush()
        raise VerificationError(findings=result.broken)


__all__ = ["register"]
