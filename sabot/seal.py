"""Seals: what makes a finished attempt evidence.

An attempt is sealed when its run finishes: `seal.json` in its directory lists the SHA-256 of
every file the attempt holds and where it was sealed (its path under the run root), authenticated
by an HMAC-SHA256 under the store's key. The key is kept beside the store, never in the run root,
so whoever can write the run root but not read the key cannot edit a sealed file, forge a seal,
hand-place an attempt or move one to another slot without the seal failing. Whoever holds the key
can seal anything: the seal is as trustworthy as the key's keeper.

Every path that takes an attempt as evidence (ingest, reuse, replay, verify) calls `verify`; a
refusal is one line naming the directory and what differs.
"""

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

SEAL_FILE = "seal.json"
KEY_FILE = "seal.key"
KEY_ENV = "SABOT_SEAL_KEY_FILE"  # a worker host that mounts the run root elsewhere names the key here


class SealError(ValueError):
    """An attempt that is not sealed, or no longer matches its seal: never evidence."""


def key_path(run_root: Path) -> Path:
    """The store's key: beside the run root (in the store's own directory), never inside it."""
    return Path(os.environ[KEY_ENV]) if os.environ.get(KEY_ENV) else Path(run_root).parent / KEY_FILE


def store_key(run_root: Path) -> bytes:
    """The key seals are made and checked with, created (owner-only) on first use."""
    path = key_path(run_root)
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    return bytes.fromhex(path.read_text().strip())


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mac(key: bytes, where: str, files: dict[str, str]) -> str:
    message = json.dumps({"directory": where, "files": files}, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def seal_document(key: bytes, where: str, files: dict[str, str]) -> dict:
    """The seal of the files `{name: sha256}` of the attempt at `where` (its path under the run root)."""
    return {"directory": where, "files": dict(sorted(files.items())), "hmac": _mac(key, where, files)}


def write_seal(directory: Path, where: str, files: dict[str, str], key: bytes) -> None:
    tmp = Path(directory) / (SEAL_FILE + ".tmp")
    tmp.write_text(json.dumps(seal_document(key, where, files), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, Path(directory) / SEAL_FILE)


@dataclass(frozen=True)
class Seal:
    directory: str
    files: dict[str, str]
    hmac: str


def read_seal(directory: Path, where: str) -> Seal:
    try:
        doc = json.loads((Path(directory) / SEAL_FILE).read_text())
        return Seal(doc["directory"], dict(doc["files"]), doc["hmac"])
    except FileNotFoundError:
        raise SealError(f"attempt {where}: not sealed (no {SEAL_FILE}): not accepted as evidence") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SealError(f"attempt {where}: {SEAL_FILE} unreadable ({exc}): not accepted as evidence") from exc


def verify(run_root: Path, directory: Path, key: bytes | None = None) -> Seal:
    """The attempt's seal, after checking every file against it and the seal against the key."""
    directory = Path(directory)
    where = directory.relative_to(run_root).as_posix()
    seal = read_seal(directory, where)
    on_disk = {p.name: p for p in directory.iterdir() if p.name != SEAL_FILE}
    for name in sorted(set(seal.files) | set(on_disk)):
        if name not in on_disk:
            raise SealError(f"attempt {where}: {name} is sealed but missing")
        if name not in seal.files:
            raise SealError(f"attempt {where}: {name} is not covered by its seal (placed after the run finished)")
        path = on_disk[name]
        if not path.is_file() or path.is_symlink():
            raise SealError(f"attempt {where}: {name} is not a regular file")
        found = _sha256(path.read_bytes())
        if found != seal.files[name]:
            raise SealError(
                f"attempt {where}: {name} differs from its seal (sha256 {found[:12]}, sealed {seal.files[name][:12]})"
            )
    if seal.directory != where:
        raise SealError(f"attempt {where}: sealed as {seal.directory} (moved or copied from another slot)")
    if not hmac.compare_digest(seal.hmac, _mac(key or store_key(run_root), where, seal.files)):
        raise SealError(
            f"attempt {where}: {SEAL_FILE} does not verify under this store's key (edited, or sealed by another store)"
        )
    return seal


def sha256_text(text: str) -> str:
    return _sha256(text.encode())


def file_hashes(directory: Path, names) -> dict[str, str]:
    return {name: _sha256((Path(directory) / name).read_bytes()) for name in names}
