"""attest.builder's names load from their module on first use: a part of the layer costs only that part."""

from __future__ import annotations

import importlib
import subprocess
import sys

import attest.builder


def test_the_parts_the_review_commands_use_import_nothing_else_of_the_layer() -> None:
    """review start (staging, removal) and review exec (the sandbox's tools, the build codes) import these four (and the
    sandbox its step capture and its layout's target check); the package's own module used to import every module of the
    layer with them (packaging's parsers, promotion, rebuilders)."""
    script = ("import sys\n"
              "import attest.builder._codes, attest.builder._common, attest.builder._outputs, attest.builder._sandbox\n"
              "extra = sorted(m for m in sys.modules if m.startswith(('attest.builder.', 'packaging')) and m not in (\n"
              "    'attest.builder._codes', 'attest.builder._common', 'attest.builder._outputs', 'attest.builder._sandbox',\n"
              "    'attest.builder._capture', 'attest.builder._confine'))\n"
              "assert not extra, extra\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert out.returncode == 0, out.stderr


def test_every_exported_name_is_its_modules_object() -> None:
    names = attest.builder.__all__
    assert set(names) <= set(dir(attest.builder))
    for name in names:
        value = getattr(attest.builder, name)
        module = importlib.import_module(f"attest.builder.{attest.builder._WHERE[name]}")
        assert value is getattr(module, name), name
    namespace: dict[str, object] = {}
    exec("from attest.builder import *", namespace)  # the star import resolves every name
    assert set(names) <= set(namespace)
    try:
        attest.builder.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("an unknown name resolved")
