"""Lock parsing: strict PEP 751 and hash-checking requirements (THREATS.md H)."""

from __future__ import annotations

import pytest

from attest.builder import BuildCode, parse_pylock, parse_requirements
from attest.errors import InputError

H = "a" * 64
WHEEL = f'[[packages.wheels]]\nname = "foo-1.0-py3-none-any.whl"\nurl = "https://x.invalid/foo-1.0-py3-none-any.whl"\nhashes = {{ sha256 = "{H}" }}\n'


def pylock(pkg: str = 'name = "foo"\nversion = "1.0"\n', wheels: str = WHEEL, top: str = 'lock-version = "1.0"\n') -> bytes:
    return (top + "[[packages]]\n" + pkg + wheels).encode()


def test_pylock_ok() -> None:
    lock = parse_pylock(pylock())
    assert lock.packages[0].name == "foo"
    assert lock.packages[0].wheels[0].sha256 == H
    assert len(lock.digest) == 64


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (pylock(top='lock-version = "2.0"\n'), BuildCode.BAD_LOCK),
        (pylock(top='lock-version = "1.0"\nsurprise = 1\n'), BuildCode.BAD_LOCK),
        (b'lock-version = "1.0"\nlock-version = "1.0"\n', BuildCode.BAD_LOCK),  # duplicate key
        (pylock(pkg='name = "foo"\nversion = "1.0"\nsdist = { name = "foo-1.0.tar.gz", hashes = { sha256 = "' + H + '" } }\n'), BuildCode.LOCK_NOT_WHEEL),
        (pylock(pkg='name = "foo"\nversion = "1.0"\nvcs = { type = "git", url = "https://x", commit-id = "' + "b" * 40 + '" }\n'), BuildCode.LOCK_NOT_WHEEL),
        (pylock(wheels=WHEEL.replace(f'hashes = {{ sha256 = "{H}" }}', 'hashes = { md5 = "00" }')), BuildCode.LOCK_UNHASHED),
        (pylock(wheels=WHEEL.replace(H, "A" * 64)), BuildCode.LOCK_UNHASHED),
        (pylock(pkg='name = "foo"\n'), BuildCode.LOCK_NOT_PINNED),
        (pylock(wheels=WHEEL.replace("foo-1.0-py3-none-any.whl\"\nurl", "foo-1.0.tar.gz\"\nurl")), BuildCode.LOCK_NOT_WHEEL),
        (pylock(wheels=WHEEL.replace("https://", "http://")), BuildCode.BAD_LOCK),
        # PEP 751: a wheel's url is required if its path is not, and the other way round
        (pylock(wheels=WHEEL.replace('url = "https://x.invalid/foo-1.0-py3-none-any.whl"\n', "")), BuildCode.BAD_LOCK),
        (pylock() + b"[[packages]]\nname = \"Foo\"\nversion = \"1.0\"\n" + WHEEL.encode(), BuildCode.LOCK_DUPLICATE),
    ],
)
def test_pylock_refusals(data: bytes, code: BuildCode) -> None:
    with pytest.raises(InputError) as ei:
        parse_pylock(data)
    assert ei.value.code == code


def test_requirements_ok() -> None:
    lock = parse_requirements(f"# comment\nfoo==1.0 \\\n    --hash=sha256:{H}\nbar==2.0 ; python_version < '3' --hash=sha256:{'b' * 64}\n".encode())
    assert [p.name for p in lock.packages] == ["foo", "bar"]
    assert lock.packages[1].marker is not None
    assert lock.format == "requirements"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("foo==1.0\n", BuildCode.LOCK_UNHASHED),
        (f"foo>=1.0 --hash=sha256:{H}\n", BuildCode.LOCK_NOT_PINNED),
        (f"foo==1.* --hash=sha256:{H}\n", BuildCode.LOCK_NOT_PINNED),
        (f"-e . --hash=sha256:{H}\n", BuildCode.BAD_LOCK),
        (f"--index-url https://evil\nfoo==1 --hash=sha256:{H}\n", BuildCode.BAD_LOCK),
        (f"foo @ https://x/foo.tar.gz --hash=sha256:{H}\n", BuildCode.LOCK_NOT_WHEEL),
        (f"foo==1 --hash=sha256:{H}\nFoo==1 --hash=sha256:{H}\n", BuildCode.LOCK_DUPLICATE),
        ("foo==1 --hash=sha256:xyz\n", BuildCode.LOCK_UNHASHED),
        ("", BuildCode.BAD_LOCK),
    ],
)
def test_requirements_refusals(text: str, code: BuildCode) -> None:
    with pytest.raises(InputError) as ei:
        parse_requirements(text.encode())
    assert ei.value.code == code


def test_two_applicable_markers_for_one_package_are_a_duplicate() -> None:
    """Different marker strings pass the parser, but when both apply, the lock names two files for one package."""
    from attest.builder import interpreter_identity, select_wheels

    text = (f"foo==1.0 ; python_version >= '3' --hash=sha256:{H}\n"
            f"foo==1.1 ; sys_platform == 'linux' --hash=sha256:{'b' * 64}\n"
            f"foo==1.2 ; python_version < '3' --hash=sha256:{'c' * 64}\n")
    lock = parse_requirements(text.encode())
    assert len(lock.packages) == 3
    with pytest.raises(InputError) as ei:
        select_wheels(lock, interpreter_identity(), None)
    assert ei.value.code == BuildCode.LOCK_DUPLICATE and "foo" in str(ei.value)
    # Markers that do separate environments are fine: only the applicable entry is selected (and then sought).
    separated = parse_requirements((f"foo==1.0 ; python_version >= '3' --hash=sha256:{H}\n"
                                    f"foo==1.2 ; python_version < '3' --hash=sha256:{'c' * 64}\n").encode())
    with pytest.raises(InputError) as ei:
        select_wheels(separated, interpreter_identity(), None)
    assert ei.value.code == BuildCode.NOT_IN_CACHE
