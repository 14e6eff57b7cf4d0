"""Who made a bundle: an Ed25519 signature over its manifest, under a key that lives outside the store.

A bundle's manifest lists the SHA-256 of every file, so it proves the bundle's own consistency; it
cannot prove who wrote it, since anyone can rewrite a manifest after editing a file. The signature
can: it is made with a private key the exporter keeps at a path they name (`--signing-key`, else
SABOT_SIGNING_KEY, else ~/.config/sabot/signing.key), never under SABOT_VAR, where the store, the run
root and the pipelines' scratch live. The key is created on first use, owner-only (0600), with its
public half beside it (`<key>.pub`, PEM) to publish; a key file others may read is refused.

A verifier holding the published public key (or the manifest's published SHA-256) can tell a bundle
signed by that key from one forged without it. Ed25519 comes from pyca/cryptography.
"""

import base64
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_ENV = "SABOT_SIGNING_KEY"
SCHEME = "ed25519"


class SigningError(ValueError):
    """A signing key that cannot be used (misplaced, readable by others, malformed), named by path."""


def default_key_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "sabot" / "signing.key"


def key_path(named: str | Path | None, var_dir: Path) -> Path:
    """The signing key's path: `named`, else SABOT_SIGNING_KEY, else the default; refused under `var_dir`."""
    path = Path(named or os.environ.get(KEY_ENV) or default_key_path()).expanduser().absolute()
    var = Path(var_dir).absolute()
    if path.resolve().is_relative_to(var.resolve()):
        raise SigningError(
            f"{path}: the signing key must live outside SABOT_VAR ({var}), where the store, the run root and "
            f"the pipelines' scratch are; name another path with --signing-key or {KEY_ENV}"
        )
    return path


def public_path(private: Path) -> Path:
    return private.with_name(private.name + ".pub")


def load_or_create(path: Path) -> Ed25519PrivateKey:
    """The private key at `path`, created (0600, with `<path>.pub` beside it) if there is none."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another export made it first
            return load_or_create(path)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        public_path(path).write_bytes(public_pem(key.public_key()))
        return key
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningError(
            f"{path}: the signing key is readable by others (mode {stat.S_IMODE(mode):o}); `chmod 600 {path}`"
        )
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{path}: not a PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path}: not an Ed25519 key ({type(key).__name__})")
    if not public_path(path).exists():
        public_path(path).write_bytes(public_pem(key.public_key()))
    return key


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_public(path: Path) -> Ed25519PublicKey:
    """A published public key (PEM), as `--key` names it."""
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except OSError as exc:
        raise SigningError(f"{path}: unreadable ({exc.strerror})") from None
    except ValueError as exc:
        raise SigningError(f"{path}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningError(f"{path}: not an Ed25519 public key ({type(key).__name__})")
    return key


def fingerprint(key: Ed25519PublicKey) -> str:
    """The public key's SHA-256 over its raw 32 bytes: what an exporter publishes beside the key."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "SHA256:" + hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class Signature:
    """A detached signature over one file's bytes, with the signer's public key and fingerprint."""

    public_key: str  # base64 of the raw 32 bytes
    fingerprint: str
    signature: str  # base64

    def as_dict(self, signed: str) -> dict:
        return {
            "scheme": SCHEME,
            "signed": signed,
            "public_key": self.public_key,
            "fingerprint": self.fingerprint,
            "signature": self.signature,
        }

    def verifies_under(self, key: Ed25519PublicKey, data: bytes) -> bool:
        try:
            key.verify(base64.b64decode(self.signature, validate=True), data)
        except (InvalidSignature, ValueError):
            return False
        return True


def sign(key: Ed25519PrivateKey, data: bytes) -> Signature:
    public = key.public_key()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return Signature(base64.b64encode(raw).decode(), fingerprint(public), base64.b64encode(key.sign(data)).decode())


def signature_from(doc: dict) -> Signature:
    if doc.get("scheme") != SCHEME:
        raise SigningError(f"signature scheme {doc.get('scheme')!r}, expected {SCHEME}")
    try:
        return Signature(str(doc["public_key"]), str(doc["fingerprint"]), str(doc["signature"]))
    except KeyError as exc:
        raise SigningError(f"signature without {exc.args[0]}") from None
