"""Keys and signers: ed25519 and ECDSA P-256 from PEM, securesystemslib private-key URIs.

An encrypted PEM private key (PKCS#8 ``ENCRYPTED PRIVATE KEY``, or traditional OpenSSL
encryption) is decrypted with the passphrase in ``ATTEST_KEY_PASSPHRASE`` or, when standard
input is a terminal, one asked for with ``getpass``; every command that takes ``--key`` gets it.

    >>> generate_key("ed25519", "release.pem")        # release.pem (0600) + release.pub.pem
    >>> signer = load_signer("release.pem")
    >>> signer.sign(b"bytes")                         # raw signature bytes

A :class:`Signer` is anything with ``key_id``, ``public_key`` and ``sign(data) -> bytes``.
Signatures are verified by this module, never matched to keys by the (unauthenticated)
key id an envelope carries: every trusted key is tried against every signature.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from .._fs import read_bounded
from .._safefs import O_NEW
from ..errors import CommonCode, InputError
from ._codes import AttestationCode

KEY_KINDS = ("ed25519", "ecdsa-p256")
MAX_KEY_BYTES = 64 * 1024
PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey


def public_key_der(key: PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def public_key_pem(key: PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(key: PublicKey) -> str:
    """Hex SHA-256 of the DER SubjectPublicKeyInfo: one key, one id, whatever its PEM spelling.

    Raises:
        Nothing: ``key`` is an already-loaded public key.
    """
    return hashlib.sha256(public_key_der(key)).hexdigest()


def _check_public(key: object, where: str) -> PublicKey:
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise InputError(AttestationCode.BAD_KEY, f"unsupported key type {type(key).__name__}: only ed25519 and ECDSA P-256", where)


def load_public_key_pem(data: bytes, where: str) -> PublicKey:
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise InputError(AttestationCode.BAD_KEY, f"not a PEM public key: {e}", where) from e
    return _check_public(key, where)


def verify_signature(key: PublicKey, signature: bytes, data: bytes) -> bool:
    """True only if ``signature`` is valid over ``data`` under ``key``.

    Returns a verdict despite its name (a ``check_*`` in the naming rule).

    Raises:
        Nothing: an invalid or malformed signature is ``False``.
    """
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, data)
        else:
            key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


@runtime_checkable
class Signer(Protocol):
    """Signs bytes with one key. ``key_id`` is the hint written next to the signature."""

    @property
    def key_id(self) -> str: ...

    @property
    def public_key(self) -> PublicKey: ...

    def sign(self, data: bytes) -> bytes:
        """The raw signature over ``data`` (for DSSE, ``data`` is the PAE).

        Raises:
            InputError: ``SIGNING_FAILED`` when the key backend cannot sign, or signs with
                another key than ``public_key`` (implementations must check).
        """
        ...


@dataclass(frozen=True, slots=True, eq=False)
class PemSigner:
    """A signer over an in-memory ed25519 or P-256 private key (from a PKCS#8 PEM file)."""

    private_key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey

    @property
    def public_key(self) -> PublicKey:
        return self.private_key.public_key()

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)

    def sign(self, data: bytes) -> bytes:
        """The raw signature over ``data`` (ed25519, or ECDSA P-256 with SHA-256, DER).

        Raises:
            Nothing: an in-memory key signs or the process has bigger problems.
        """
        if isinstance(self.private_key, ed25519.Ed25519PrivateKey):
            return self.private_key.sign(data)
        return self.private_key.sign(data, ec.ECDSA(hashes.SHA256()))


class SslibSignature(Protocol):
    """What :class:`SslibSigner` reads of a securesystemslib ``Signature``: the hex signature."""

    @property
    def signature(self) -> str: ...


class SslibBackend(Protocol):
    """What :class:`SslibSigner` calls on a securesystemslib ``Signer``."""

    def sign(self, payload: bytes) -> SslibSignature: ...


@dataclass(frozen=True, slots=True, eq=False)
class SslibSigner:
    """A securesystemslib signer (KMS, HSM, ``file2:`` ...) seen through our interface."""

    inner: SslibBackend
    public: PublicKey

    @property
    def public_key(self) -> PublicKey:
        return self.public

    @property
    def key_id(self) -> str:
        return key_id(self.public)

    def sign(self, data: bytes) -> bytes:
        """The backend's raw signature over ``data``, checked against ``public`` before it is returned.

        Raises:
            InputError: ``SIGNING_FAILED`` when the backend fails, or returns a signature that
                does not verify under its public key (a wrong key behind the URI).
        """
        try:
            signature = self.inner.sign(data)
            raw = bytes.fromhex(signature.signature)
        except Exception as e:
            raise InputError(AttestationCode.SIGNING_FAILED, f"the key backend failed to sign: {type(e).__name__}: {e}") from e
        # Never emit a signature we cannot verify ourselves (a wrong key behind a URI).
        if not verify_signature(self.public, raw, data):
            raise InputError(AttestationCode.SIGNING_FAILED, "the key backend returned a signature that does not verify under its public key")
        return raw


def public_key_path(private: str | os.PathLike[str]) -> Path:
    """``KEY.pem`` -> ``KEY.pub.pem`` (any other name gets ``.pub.pem`` appended).

    Raises:
        Nothing: a pure function of the name; nothing is read.
    """
    name = os.fspath(private)
    return Path(name[: -len(".pem")] + ".pub.pem" if name.endswith(".pem") else name + ".pub.pem")


def generate_key(kind: str, out: str | os.PathLike[str]) -> None:
    """Write an unencrypted PKCS#8 private key (mode 0600) to ``KEY.pem`` and ``KEY.pub.pem`` beside it.

    Raises:
        InputError: ``USAGE`` for a ``kind`` not in ``KEY_KINDS``; ``KEY_EXISTS`` when either
            file (or a symlink there) exists; ``UNREADABLE`` when a file cannot be created.
    """
    if kind == "ed25519":
        private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey = ed25519.Ed25519PrivateKey.generate()
    elif kind == "ecdsa-p256":
        private = ec.generate_private_key(ec.SECP256R1())
    else:
        raise InputError(CommonCode.USAGE, f"key type {kind!r} is not one of {', '.join(KEY_KINDS)}")
    path = Path(out)
    pub_path = public_key_path(path)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    pub = public_key_pem(private.public_key())
    for target in (path, pub_path):
        if os.path.lexists(target):
            raise InputError(AttestationCode.KEY_EXISTS, "refusing to overwrite an existing file", str(target))
    # O_EXCL: never follow a planted symlink, never truncate a key someone else wrote meanwhile.
    for target, data, mode in ((path, pem, 0o600), (pub_path, pub, 0o644)):
        try:
            fd = os.open(target, O_NEW, mode)
        except FileExistsError as e:
            raise InputError(AttestationCode.KEY_EXISTS, "refusing to overwrite an existing file", str(target)) from e
        except OSError as e:
            raise InputError(CommonCode.UNREADABLE, f"cannot create the key file: {e.strerror}", str(target)) from e
        try:
            os.fchmod(fd, mode)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


#: The environment variable that holds the passphrase of an encrypted PEM private key.
PASSPHRASE_ENV = "ATTEST_KEY_PASSPHRASE"
MAX_PASSPHRASE_BYTES = 4096


def _passphrase(where: str) -> bytes:
    """The passphrase for the encrypted key at ``where``: ``$ATTEST_KEY_PASSPHRASE``, else a prompt on a terminal.

    Never read from a pipe or a file: a non-interactive run without the variable fails rather
    than block or consume its standard input.
    """
    value = os.environ.get(PASSPHRASE_ENV)
    if value is None:
        try:
            interactive = sys.stdin is not None and sys.stdin.isatty()
        except (ValueError, OSError):  # a closed or unusual stdin
            interactive = False
        if not interactive:
            raise InputError(AttestationCode.KEY_PASSPHRASE_REQUIRED,
                             f"the private key is encrypted: set {PASSPHRASE_ENV} to its passphrase (or run on a terminal to be asked)",
                             where)
        try:
            value = getpass.getpass(f"Passphrase for {where}: ")
        except (EOFError, KeyboardInterrupt, OSError) as e:
            raise InputError(AttestationCode.KEY_PASSPHRASE_REQUIRED, "no passphrase was entered for the encrypted private key",
                             where) from e
    encoded = value.encode("utf-8", "surrogateescape")
    if not encoded or len(encoded) > MAX_PASSPHRASE_BYTES:
        raise InputError(AttestationCode.BAD_PASSPHRASE, f"the passphrase is empty or longer than {MAX_PASSPHRASE_BYTES} bytes", where)
    return encoded


def load_private_key_pem(data: bytes, where: str) -> PemSigner:
    """A signer from PEM private-key bytes; an encrypted key is decrypted with :func:`_passphrase`.

    Raises:
        InputError: ``BAD_KEY`` (not a PEM private key, an unsupported key type);
            ``KEY_PASSPHRASE_REQUIRED`` (encrypted, no ``ATTEST_KEY_PASSPHRASE`` and no
            terminal to ask on); ``BAD_PASSPHRASE`` (the passphrase does not decrypt it).
    """
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        # Encrypted (cryptography refuses to try without a password). The passphrase is asked
        # for only now, so an unencrypted key never needs the variable.
        passphrase = _passphrase(where)
        try:
            key = serialization.load_pem_private_key(data, password=passphrase)
        except ValueError as e:
            # cryptography does not tell a wrong passphrase from a corrupt encrypted body.
            raise InputError(AttestationCode.BAD_PASSPHRASE, "the passphrase does not decrypt the private key "
                             f"(wrong passphrase, or a damaged key): {e}", where) from None
        except (TypeError, UnsupportedAlgorithm) as e:
            raise InputError(AttestationCode.BAD_KEY, f"cannot decrypt the private key: {e}", where) from None
    except (ValueError, UnsupportedAlgorithm) as e:
        raise InputError(AttestationCode.BAD_KEY, f"not a PEM private key: {e}", where) from e
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return PemSigner(key)
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return PemSigner(key)
    raise InputError(AttestationCode.BAD_KEY, f"unsupported key type {type(key).__name__}: only ed25519 and ECDSA P-256", where)


def _uri_scheme(key: str) -> str | None:
    scheme, sep, _ = key.partition(":")
    if sep and len(scheme) > 1 and scheme.replace("-", "").replace("+", "").isalnum():
        return scheme
    return None


def signer_key_file(key: str) -> str | None:
    """The file :func:`load_signer` reads ``key``'s private key from; None for a key held elsewhere.

    The same decision as ``load_signer`` makes, so a caller that must keep the key out of some
    tree checks exactly the file that will be read, never the spelling of ``key``.

    Raises:
        Nothing: nothing is opened (it only asks whether ``key`` exists as a path).
    """
    scheme = _uri_scheme(key)
    if scheme is None or (os.path.exists(key) and scheme not in _sslib_schemes()):
        return key
    if scheme == "file2":
        return key.split(":", 1)[1]
    if scheme not in _sslib_schemes():
        return key  # load_signer refuses it; judge it as the path it names
    return None  # KMS, HSM, ...: no file of ours


def load_signer(key: str, *, public_key: str | os.PathLike[str] | None = None) -> Signer:
    """A signer from a PEM private-key path or a securesystemslib private-key URI.

    URIs (``file2:``, ``gcpkms:``, ``awskms:``, ``azurekms:``, ``hsm:``, ...) need the public
    key as a PEM file, because securesystemslib binds a signer to its public key; for
    ``file2:`` it is derived from the private key when not given.

    Raises:
        InputError: ``UNREADABLE`` / ``TOO_LARGE`` for a key file that cannot be read;
            ``BAD_KEY`` for a key that is not an unencrypted ed25519 or P-256 PEM key, an
            unknown URI scheme or a URI securesystemslib cannot open; ``USAGE`` for a KMS/HSM
            URI given without its public key.
    """
    scheme = _uri_scheme(key)
    if scheme is None or (os.path.exists(key) and scheme not in _sslib_schemes()):
        data = read_bounded(key, what="private key", max_bytes=MAX_KEY_BYTES)
        return load_private_key_pem(data, key)
    if scheme not in _sslib_schemes():
        raise InputError(AttestationCode.BAD_KEY, f"unknown private-key URI scheme {scheme!r}", key)
    from securesystemslib.signer import Signer as SslSigner  # type: ignore[attr-defined]  # lazy: ~13 ms, only for a key URI
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]  # lazy: ~13 ms, only for a key URI

    if public_key is not None:
        where = os.fspath(public_key)
        pub = load_public_key_pem(read_bounded(public_key, what="public key", max_bytes=MAX_KEY_BYTES), where)
    elif scheme == "file2":
        path = key.split(":", 1)[1]
        pub = load_signer(path).public_key
    else:
        raise InputError(CommonCode.USAGE, f"a {scheme}: key URI needs its public key (--public-key PEM)", key)
    try:
        ssl_key = SSlibKey.from_crypto(pub, keyid=key_id(pub))
        inner = SslSigner.from_priv_key_uri(key, ssl_key)
    except Exception as e:
        raise InputError(AttestationCode.BAD_KEY, f"cannot open the key URI: {type(e).__name__}: {e}", key) from e
    return SslibSigner(inner, pub)


def _sslib_schemes() -> set[str]:
    from securesystemslib.signer import SIGNER_FOR_URI_SCHEME  # type: ignore[attr-defined]  # lazy: ~13 ms (-X importtime), only for a key URI

    return set(SIGNER_FOR_URI_SCHEME)
