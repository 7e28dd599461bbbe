"""`attest fetch`, `attest build runtime|skill`, `attest rebuild`, `attest rebuild-release`, `attest promote`.

No command exits on its own: failures are raised (a failed rebuild check as
:class:`ReportedFailure` with its report) and ``attest.cli.main`` renders them and exits.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from .._plural import count
from ..errors import CommonCode, InputError, VerificationError
from ._app import (
    BackendOption,
    JsonOption,
    ReportedFailure,
    StateDirOption,
    argument,
    checked_output,
    error_text,
    flag,
    new_group,
    option,
    print_json,
    state_to_write,
    working,
)

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.builder +0.3 s, attest.review.release +0.44 s, over the app's own 60 ms (-X importtime after
# build_app(), median of 5).

CacheOption = option(None, "--cache", metavar="DIR", help="Fetched-input cache [default: STATE_DIR/cache].")
KeyOption = option(None, "--key", metavar="KEY", help="Private key (PEM or signer URI) that signs the attestations.")
KeysOption = option([], "--key", metavar="KEY", help="Private key (PEM or signer URI) that signs the attestations. "
                          "Repeatable: each attestation is one DSSE envelope with one signature per key.")
UnisolatedOption = flag("--allow-network-unisolated",
                        help="Build even when no empty network namespace can be made (recorded in the output).")
PythonOption = option(None, "--python", metavar="PATH", help="Interpreter to build for [default: the recipe's, else this one].")
FormatOption = option("dsse", "--format", metavar="FORMAT", help="Attestation format: dsse or bundle.")
_HERE_OR_CHECKOUT = " (a default path is the current directory's, else this attest checkout's)"
RuntimeRecipeOption = option("builders/runtime.toml", "--runtime-recipe", metavar="FILE", help="The runtime recipe" + _HERE_OR_CHECKOUT + ".")
SkillRecipeOption = option("builders/skill.toml", "--skill-recipe", metavar="FILE", help="The skill recipe" + _HERE_OR_CHECKOUT + ".")


def _default_path(value: str, default: str) -> str:
    """``value``, except that the default, missing here, is the one beside this attest package (its checkout's builders/)."""
    if value != default or os.path.exists(value):
        return value
    beside = Path(__file__).resolve().parents[2] / default
    return str(beside) if beside.exists() else value
_RECIPES = ("builders/runtime.toml", "builders/skill.toml")  # the names `attest rebuild` finds in this checkout too
SkillRevOption = option(None, "--skill-rev", metavar="SHA", help="Skill source SHA [default: --toolchain-rev].")
InstallerRevOption = option(None, "--installer-rev", metavar="SHA", help="Installer SHA [default: --toolchain-rev].")


def register(app: typer.Typer) -> None:
    build_app = new_group("build", "Hermetic, input-addressed builds of the runtime and the skill.")
    app.command("fetch")(fetch)
    build_app.command("runtime")(build_runtime)
    build_app.command("skill")(build_skill)
    app.add_typer(build_app, name="build")
    app.command("rebuild")(rebuild)
    app.command("rebuild-release")(rebuild_release)
    app.command("promote")(promote)


def _ids(sandbox: dict[str, object]) -> str:
    uid, gid = sandbox.get("uid"), sandbox.get("gid")
    return str(uid) if isinstance(uid, str) else f"{uid}/{gid}"


def _state(state_dir: Optional[str]) -> str:
    """Every command here writes into its state directory (the cache, builds, records) and creates a missing one."""
    return state_to_write(state_dir)


def fetch(
    lock: str = option("lockfiles/pylock.toml", "--lock", metavar="FILE",
                       help="pylock.toml or requirements lock with --hash lines" + _HERE_OR_CHECKOUT + "."),
    cache: Optional[str] = CacheOption,
    state_dir: Optional[str] = StateDirOption,
    python: Optional[str] = PythonOption,
    json_mode: bool = JsonOption,
) -> None:
    """Download exactly the locked wheels and check every hash (the only networked step)."""
    from ..builder import default_cache, run_fetch  # lazy

    into = cache or default_cache(_state(state_dir))
    with working(f"fetching the locked wheels into {into}", json_mode):
        result = run_fetch(_default_path(lock, "lockfiles/pylock.toml"), into, python=python)
    if json_mode:
        print_json({"ok": True, "fetched": list(result.fetched), "present": list(result.present), "network_used": result.network_used})
    else:
        print(f"fetched {len(result.fetched)}, already present {len(result.present)} (every hash checked) into {into}")


def _print_build(result: object, json_mode: bool) -> None:
    from ..builder import BuildResult  # lazy

    assert isinstance(result, BuildResult)
    if json_mode:
        print_json({"ok": True, **result.to_json()})
        return
    if result.reused:
        # Nothing ran now: what follows is the stored build's record, and says so.
        print(f"reused {result.kind} {result.name} from the store (no build step ran; the image's content was verified)")
        if result.kind == "runtime":
            print("  as recorded by the build that made it:")
    else:
        print(f"built {result.kind} {result.name}")
    print(f"  image:        {result.store_path}")
    print(f"  inventory:    {result.inventory.identity} ({count(len(result.inventory.entries), 'entry')})")
    print(f"  immutability: {result.immutability}")
    if result.kind == "runtime":
        print(f"  network:      {'isolated (empty network namespace)' if result.network_isolated else 'NOT ISOLATED (accepted by --allow-network-unisolated)'}")
        confined = result.details.get("filesystem_confined")
        sandbox = result.details.get("sandbox") or {}
        if confined:
            print(f"  confinement:  namespaces {', '.join(sandbox.get('namespaces', []))}; uid/gid {_ids(sandbox)}; "
                  f"capabilities {sandbox.get('capabilities')}")
            print(f"  filesystem:   {sandbox.get('root')}; /dev: {sandbox.get('dev')}; /proc: {sandbox.get('proc')}; "
                  f"tmpfs {', '.join(sandbox.get('tmpfs', []))}")
        else:
            print("  filesystem:   NOT CONFINED (accepted by --allow-network-unisolated; never reused by a confined build, never promoted)")
    for path in result.attestations:
        print(f"  attestation:  {path}")
    if not result.attestations:
        print("  attestation:  none (no --key)")


def build_runtime(
    recipe: str = argument("builders/runtime.toml", metavar="RECIPE", help="The runtime recipe" + _HERE_OR_CHECKOUT + "."),
    toolchain_rev: str = option(..., "--toolchain-rev", metavar="SHA", help="Full git SHA of the toolchain."),
    state_dir: Optional[str] = StateDirOption,
    cache: Optional[str] = CacheOption,
    key: list[str] = KeysOption,
    allow_network_unisolated: bool = UnisolatedOption,
    python: Optional[str] = PythonOption,
    fmt: str = FormatOption,
    backend: Optional[str] = BackendOption,
    json_mode: bool = JsonOption,
) -> None:
    """Build the runtime (toolchain at a full SHA plus its locked wheels) into the store."""
    from ..builder import run_build_runtime  # lazy

    with working(f"building the runtime at {toolchain_rev[:12]}", json_mode):
        result = run_build_runtime(_default_path(recipe, "builders/runtime.toml"), toolchain_rev, _state(state_dir), cache=cache, key=key,
                                   allow_unisolated_network=allow_network_unisolated, python=python, fmt=fmt, freeze_backend=backend)
    _print_build(result, json_mode)


def build_skill(
    recipe: str = argument("builders/skill.toml", metavar="RECIPE", help="The skill recipe" + _HERE_OR_CHECKOUT + "."),
    skill_rev: str = option(..., "--skill-rev", metavar="SHA", help="Full git SHA of the skill source."),
    installer_rev: Optional[str] = option(None, "--installer-rev", metavar="SHA", help="Full SHA of the installer [default: --skill-rev]."),
    state_dir: Optional[str] = StateDirOption,
    key: list[str] = KeysOption,
    fmt: str = FormatOption,
    backend: Optional[str] = BackendOption,
    json_mode: bool = JsonOption,
) -> None:
    """Install the skill subtree of the source repository at a full SHA, from git objects."""
    from ..builder import run_build_skill  # lazy

    with working(f"building the skill at {skill_rev[:12]}", json_mode):
        result = run_build_skill(_default_path(recipe, "builders/skill.toml"), skill_rev, _state(state_dir), installer_rev=installer_rev, key=key, fmt=fmt, freeze_backend=backend)
    _print_build(result, json_mode)


def rebuild(
    recipe: str = argument(metavar="RECIPE", help="The recipe to rebuild and compare, builders/runtime.toml or builders/skill.toml"
                           " (each the current directory's, else this attest checkout's), or any recipe's path."),
    rev: str = option(..., "--rev", metavar="SHA", help="Full git SHA of the recipe's source (toolchain or skill source)."),
    state_dir: Optional[str] = StateDirOption,
    cache: Optional[str] = CacheOption,
    installer_rev: Optional[str] = option(None, "--installer-rev", metavar="SHA", help="Skill recipes: installer SHA [default: --rev]."),
    key: Optional[str] = KeyOption,
    vsa: Optional[str] = option(None, "--vsa", metavar="FILE", help="Write a signed SLSA VSA with the verdict here (needs --key).", callback=checked_output),
    allow_network_unisolated: bool = UnisolatedOption,
    python: Optional[str] = PythonOption,
    fmt: str = FormatOption,
    backend: Optional[str] = BackendOption,
    json_mode: bool = JsonOption,
    _check: bool = flag("--check", hidden=True, help="No effect (the recipe was once its value): `rebuild --check RECIPE` still reads."),
) -> None:
    """Build RECIPE again in another staging context; exit 0 only if the output is bit-identical to the stored build."""
    from ..builder import run_rebuild  # lazy

    if recipe in _RECIPES:
        recipe = _default_path(recipe, recipe)
    with working(f"rebuilding {recipe} at {rev[:12]}", json_mode):
        report, vsa_path = run_rebuild(recipe, rev, _state(state_dir), cache=cache, allow_unisolated_network=allow_network_unisolated,
                                       python=python, installer_rev=installer_rev, key=key, vsa_out=vsa, fmt=fmt,
                                       freeze_backend=backend)
    document = {**report.to_json(), **({"vsa": vsa_path} if vsa_path else {})}
    if not report.ok:
        error = VerificationError(findings=report.findings)
        diffs = "".join(f"{path}:\n{text}\n" for path, text in report.diffs.items())
        raise ReportedFailure(error, document=document, text=diffs + error_text(error))
    if json_mode:
        print_json(document)
        return
    print(f"REPRODUCIBLE: {report.first.name} rebuilt with inventory {report.second_identity}")
    if vsa_path:
        print(f"  vsa: {vsa_path}")


def rebuild_release(
    toolchain_rev: str = option(..., "--toolchain-rev", metavar="SHA", help="Full git SHA of the candidate to rebuild."),
    key: str = option(..., "--key", metavar="KEY", help="This rebuilder's signing key (its identity in the release policy's [rebuilders])."),
    out: str = option(..., "-o", "--output", metavar="FILE", help="Where to write the signed rebuild result.", callback=checked_output),
    runtime_recipe: str = RuntimeRecipeOption,
    skill_recipe: str = SkillRecipeOption,
    skill_rev: Optional[str] = SkillRevOption,
    installer_rev: Optional[str] = InstallerRevOption,
    state_dir: Optional[str] = StateDirOption,
    cache: Optional[str] = CacheOption,
    python: Optional[str] = PythonOption,
    fmt: str = FormatOption,
    backend: Optional[str] = BackendOption,
    json_mode: bool = JsonOption,
) -> None:
    """Rebuild a candidate's runtime and skill independently and sign a rebuild result for `attest promote`.

    Use a state directory of this rebuilder's own (--state-dir), never the promoter's.
    """
    from ..builder import run_rebuild_release  # lazy

    with working(f"rebuilding the runtime and skill at {toolchain_rev[:12]}", json_mode):
        done = run_rebuild_release(toolchain_rev, key, out, runtime_recipe=_default_path(runtime_recipe, "builders/runtime.toml"),
                                   skill_recipe=_default_path(skill_recipe, "builders/skill.toml"),
                                   state=_state(state_dir), cache=cache, python=python, installer_rev=installer_rev,
                                   skill_rev=skill_rev, fmt=fmt, freeze_backend=backend)
    if json_mode:
        print_json(done.to_json())
        return
    s = done.subject
    print(f"REBUILT {toolchain_rev}: signed rebuild result {done.path} ({done.digest}) by {', '.join(done.signers)}")
    print(f"  runtime  {s.runtime.name}: {s.runtime.inventory.identity}{' (reused from this store)' if done.runtime.reused else ''}")
    print(f"  skill    {s.skill.name}: {s.skill.inventory.identity}{' (reused from this store)' if done.skill.reused else ''}")


def promote(
    toolchain_rev: Optional[str] = option(None, "--toolchain-rev", metavar="SHA", help="Full git SHA to promote (required unless --verify-log)."),
    pins: str = option(..., "--pins", metavar="FILE", help="Deployment pins TOML (docs/formats.md \"Pins\"; rewritten atomically on success only)."),
    key: Optional[str] = option(None, "--key", metavar="KEY", help="Release signing key (required unless --verify-log)."),
    policy: str = option(..., "--policy", metavar="FILE", help="Release policy: the trusted signers and the [rebuilders] table (docs/formats.md \"Release policy\")."),
    rebuild_result: list[str] = option([], "--rebuild-result", metavar="FILE",
                                             help="A rebuilder's signed result (`attest rebuild-release`). Repeatable."),
    unsafe_without_rebuilders: bool = flag("--unsafe-without-rebuilders",
                                           help="Promote although the release policy has no [rebuilders] table "
                                                   "(no independent rebuild is required). Printed and recorded in the log."),
    repin: list[str] = option([], "--repin", metavar="WHAT",
                                    help="Allow this pinned identity to change: interpreter, lock, toolchain-repository or "
                                    "skill-source. Repeatable; every change is printed and logged."),
    fixture: str = option("builders/fixture-consumer", "--fixture", metavar="DIR",
                          help="The fixture consumer repository's files, bootstrapped and reviewed with the candidate"
                               + _HERE_OR_CHECKOUT + "."),
    verify_log: bool = flag("--verify-log", help="Only verify the promotion log beside --pins under --policy, continuing the "
                                                 "checkpoint --state-dir remembers for these pins (then remember its head)."),
    log_checkpoint: Optional[str] = option(None, "--log-checkpoint", metavar="CHECKPOINT",
                                           help="With --verify-log: a first use's checkpoint SEQ:sha256:HEX (as --verify-log prints it "
                                                "elsewhere); "
                                                "the log must hold exactly this entry at SEQ, instead of being trusted on first use."),
    runtime_recipe: str = RuntimeRecipeOption,
    skill_recipe: str = SkillRecipeOption,
    skill_rev: Optional[str] = SkillRevOption,
    installer_rev: Optional[str] = InstallerRevOption,
    state_dir: Optional[str] = StateDirOption,
    cache: Optional[str] = CacheOption,
    allow_network_unisolated: bool = UnisolatedOption,
    python: Optional[str] = PythonOption,
    fmt: str = FormatOption,
    backend: Optional[str] = BackendOption,
    json_mode: bool = JsonOption,
) -> None:
    """Build, rebuild-check and verify the candidate, require k of n rebuilders and the fixture run, then update the pins."""
    if verify_log:
        from ..builder import verify_log_checked  # lazy

        checked = verify_log_checked(pins, policy, _state(state_dir), checkpoint=log_checkpoint)
        if json_mode:
            print_json(checked.to_json())
            return
        head = checked.entries[-1]
        print(f"VERIFIED the promotion log {checked.log}: {len(checked.entries)} entr{'y' if len(checked.entries) == 1 else 'ies'}, "
              f"chain unbroken, the pins are entry {head.sequence}'s ({head.pins_sha256}, toolchain {head.toolchain_revision}, {head.time})")
        print(f"  checkpoint {checked.checkpoint} (remembered in {checked.remembered})")
        return
    if log_checkpoint is not None:
        raise InputError(CommonCode.USAGE, "--log-checkpoint goes with --verify-log: run `attest promote --verify-log --log-checkpoint "
                         "SEQ:sha256:HEX` with this --state-dir once, and promotions from it continue that checkpoint")
    if toolchain_rev is None or key is None:
        raise InputError(CommonCode.USAGE, "promote needs --toolchain-rev and --key (or --verify-log)")
    from ..review.release import promote_release  # lazy

    with working(f"promoting {toolchain_rev[:12]}: build, rebuild-check, rebuilders, fixture", json_mode):
        result = promote_release(toolchain_rev, pins, key, policy, runtime_recipe=_default_path(runtime_recipe, "builders/runtime.toml"),
                                 skill_recipe=_default_path(skill_recipe, "builders/skill.toml"),
                                 state=_state(state_dir), cache=cache, allow_unisolated_network=allow_network_unisolated, python=python,
                                 installer_rev=installer_rev, skill_rev=skill_rev, fmt=fmt, rebuild_results=rebuild_result,
                                 unsafe_without_rebuilders=unsafe_without_rebuilders, repin=repin, fixture=_default_path(fixture, "builders/fixture-consumer"),
                                 backend=backend)
    if json_mode:
        print_json(result.to_json())
        return
    print("\n".join(result.summary_lines()))
