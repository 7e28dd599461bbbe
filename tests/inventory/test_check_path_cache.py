"""check_path judges a directory's own path once: it must give the verdict of judging every component in turn."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from attest.inventory import InventoryCode, check_name, check_path
from attest.inventory._names import PATH_MAX


def _reference(path: str) -> tuple[InventoryCode, str] | None:
    """check_path as it was: every component in turn, left to right."""
    if path == "":
        return InventoryCode.BAD_PATH, "the path is empty"
    if path.startswith("/"):
        return InventoryCode.BAD_PATH, f"{path!r} is absolute"
    if len(path.encode("utf-8", "surrogatepass")) > PATH_MAX:
        return InventoryCode.PATH_TOO_LONG, f"the path is longer than {PATH_MAX} bytes"
    for component in path.split("/"):
        if component == "":
            return InventoryCode.BAD_PATH, f"{path!r} has an empty component ('//' or a trailing '/')"
        if component in (".", ".."):
            return InventoryCode.BAD_PATH, f"{path!r} has a {component!r} component"
        problem = check_name(component)
        if problem is not None:
            return problem
    return None


COMPONENTS = st.sampled_from(["a", "b", "", ".", "..", ".git", ".GIT", "a\\b", "x\u200by", "\udce9", "\x01", "ok.txt", "é"])


@settings(max_examples=500, deadline=None)
@given(st.lists(COMPONENTS, min_size=1, max_size=6), st.booleans())
def test_check_path_matches_judging_every_component(parts: list[str], absolute: bool) -> None:
    path = ("/" if absolute else "") + "/".join(parts)
    assert check_path(path) == _reference(path)
    # And again, with every prefix of it now judged once already.
    assert check_path(path) == _reference(path)


def test_a_path_of_two_thousand_components_is_judged_without_recursion() -> None:
    deep = "a/" * 2000 + "b"
    assert check_path(deep) is None
    assert check_path("a/" * 2000 + "../b") == _reference("a/" * 2000 + "../b")
