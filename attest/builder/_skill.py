"""The skill builder: a subtree of a repository at a full SHA, installed from git objects.

Steps: verify the full SHA; resolve the subtree (no symlink or gitlink on the way, none
inside); compute the input address; reuse a verified store entry; otherwise export the
subtree from objects into private staging under the install root name, normalize modes
and mtimes, check the export against the inventory computed from the objects alone, then
freeze it into the store (sealed, then verified) and record the build.
"""

from __future__ import annotations

import os

from ..errors import VerificationError
from ..git import GitRepo, verify_full_sha
from ..inventory import Entry, EntryType, Inventory, diff_inventories, inventory_tree
from ._common import builder_identity, ensure_state, make_staging
from ._outputs import BuildResult, input_digest, normalize_tree, publish, remove_tree, reuse, store_name, write_manifest
from ._recipe import SkillRecipe
from ._sandbox import SOURCE_DATE_EPOCH


def skill_inputs(recipe: SkillRecipe, rev: str, tree: str, subtree: str, installer_rev: str | None) -> dict[str, object]:
    return {
        "kind": "skill",
        "builder": builder_identity(),
        "recipe": {"name": recipe.name, "sha256": recipe.digest},
        "source": {"repository": recipe.source_repository, "revision": rev, "tree": tree,
                   "subtree": recipe.subtree, "subtree_tree": subtree},
        "installer": {"repository": recipe.installer_repository, "revision": installer_rev},
        "root": recipe.root,
    }


def expected_skill_inventory(objects: Inventory, root: str) -> Inventory:
    """The normalized tree's inventory: everything under ``root``, 0555/0444 modes."""
    entries = [Entry(root, EntryType.DIR, 0o555)]
    for e in objects.entries:
        if e.type is EntryType.DIR:
            entries.append(Entry(f"{root}/{e.path}", EntryType.DIR, 0o555))
        else:
            mode = 0o555 if e.mode & 0o111 else 0o444
            entries.append(Entry(f"{root}/{e.path}", EntryType.FILE, mode, e.size, e.sha256))
    return Inventory.from_entries(entries)


def build_skill(recipe: SkillRecipe, source_rev: str, store: str, *, installer_rev: str | None = None,
                staging_parent: str | None = None, publish_output: bool = True, umask: int = 0o022,
                freeze_backend: str | None = None) -> BuildResult:
    """Build (or reuse) the skill of ``recipe`` at ``source_rev``; ``store`` is the state dir.

    Raises:
        InputError: ``NOT_FULL_SHA`` (source or installer revision); the git layer's
            ``NOT_A_REPOSITORY`` and ``PATH_NOT_IN_TREE``.
        VerificationError: the git layer's object and tree codes (``OBJECT_MISSING``,
            ``TREE_SYMLINK``, ``GITLINK``, ``BAD_TREE_NAME``, ...); ``BUILD_RECORD_CONFLICT``;
            the inventory walker's codes.
        EnvironmentFailure: ``GIT_FAILED``; the freeze layer's codes (``STATE_INSECURE``,
            ``BACKEND_UNAVAILABLE``, ``STORE_CONFLICT``, ...).
    """
    store_root = ensure_state(store)
    verify_full_sha(source_rev, what="source revision")
    if installer_rev is not None:
        verify_full_sha(installer_rev, what="installer revision")
    with GitRepo.open(recipe.source_path) as repo:
        verify_full_sha(source_rev, repo.object_format, what="source revision")
        tree = repo.commit_tree(source_rev)
        sub = repo.subtree(tree, recipe.subtree)
        inputs = skill_inputs(recipe, source_rev, tree, sub, installer_rev)
        digest = input_digest(inputs)
        name = store_name(digest, recipe.name)
        if publish_output:
            found = reuse(store_root, name, "skill", inputs, digest, freeze_backend)
            if found is not None:
                return found
        expected = expected_skill_inventory(repo.tree_inventory(sub), recipe.root)
        with make_staging(staging_parent or os.path.join(store_root, "build-staging")) as staging:
            old = os.umask(umask)
            try:
                out = os.path.join(staging, "out")
                os.mkdir(out, 0o700)
                os.mkdir(os.path.join(out, recipe.root), 0o700)
                repo.export_tree(sub, os.path.join(out, recipe.root))
                normalize_tree(out, SOURCE_DATE_EPOCH)
                inventory = inventory_tree(out)
                differences = diff_inventories(expected, inventory)
                if differences:
                    raise VerificationError(findings=differences)
                details = {"skill": {"source_repository": recipe.source_repository, "source_revision": source_rev,
                                     "tree": tree, "subtree": recipe.subtree, "subtree_tree": sub, "root": recipe.root,
                                     "installer_repository": recipe.installer_repository, "installer_revision": installer_rev},
                           "network": "no build step runs: the tree is exported from git objects in-process"}
                if not publish_output:
                    return BuildResult("skill", name, out, inputs, digest, inventory, False, False, "none (not published)", (), details)
                image_path, immutability = publish(out, store_root, inventory, freeze_backend)
            finally:
                os.umask(old)
                if publish_output:
                    remove_tree(staging)
    result = BuildResult("skill", name, image_path, inputs, digest, inventory, False, False, immutability, (), details)
    write_manifest(result, store_root)
    return result
