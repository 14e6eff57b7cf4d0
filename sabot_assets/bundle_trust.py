"""What `sabot verify BUNDLE` can establish beyond the bundle's own consistency: who made it, and
whether it was scored under the verifier's rules.

`wave export` signs the bundle's manifest (`manifest.sig`: an Ed25519 signature, the signer's public
key and its fingerprint; `sabot.signing`). Whoever edits a file, its hash in `seals.json`, the
re-derived published files and the manifest has a bundle that is consistent again, but cannot sign
it: only a key the verifier holds (`--key PUB`) or the manifest's published SHA-256 (`--expect`)
tells the two apart. Without either, a bundle is "consistent, not authenticated", however it is
signed: a forger signs with a key of their own.

A bundle carries the rules it was scored under (rules/: the data files and their lock). They are
compared with the verifier's registered standard file by file: a bundle scored under other rules can
still be checked, never silently.
"""

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sabot import signing
from sabot.registry import LOCK_NAME, Registry

MANIFEST, SIGNATURE = "manifest.json", "manifest.sig"


def regular_bytes(path: Path) -> bytes:
    """A bundle file's bytes, refused (OSError naming it) unless it is a regular file: a FIFO would
    block the read forever, a link would read what lies outside the bundle."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            raise OSError(f"{path}: not a regular file")
        return source.read()


class NotAuthenticated(ValueError):
    """A bundle that is not what the verifier's key or expected hash says it should be; names the manifest."""


def sign_bundle(directory: Path, key) -> str:
    """Sign the bundle's manifest with `key` (an Ed25519 private key); the signer's fingerprint."""
    signature = signing.sign(key, (Path(directory) / MANIFEST).read_bytes())
    (Path(directory) / SIGNATURE).write_text(json.dumps(signature.as_dict(MANIFEST), indent=1, sort_keys=True) + "\n")
    return signature.fingerprint


@dataclass(frozen=True)
class Trust:
    """What the verifier established about a consistent bundle."""

    authenticated_by: str | None  # "signed by SHA256:..." or "manifest sha256 ... as expected"; None: not authenticated
    carried_signature: str | None  # the fingerprint the bundle's own signature names (unchecked without --key)
    rule_differences: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.authenticated_by:
            said = f"authenticated: {self.authenticated_by}"
        else:
            carried = (
                (
                    f"; it carries a signature naming {self.carried_signature}, which anyone can make with a key of their own: "
                    "check it with --key PUB (the exporter's published public key)"
                )
                if self.carried_signature
                else "; it is not signed"
            )
            said = f"consistent, not authenticated (no --key or --expect){carried}"
        rules = (
            "rules: the registered standard's, file for file"
            if not self.rule_differences
            else f"rules: differ from your registered standard in {len(self.rule_differences)} file(s):\n  "
            + "\n  ".join(self.rule_differences)
        )
        return [said, rules]

    def strict_failure(self) -> str | None:
        if not self.authenticated_by:
            return (
                "bundle manifest.json: not authenticated (--strict): name the exporter's public key with --key PUB "
                "or the published manifest hash with --expect SHA256"
            )
        if self.rule_differences:
            return f"bundle rules: scored under rules other than your registered standard in {len(self.rule_differences)} file(s) (--strict)"
        return None


def authenticate(
    directory: Path, key: Path | None = None, expect: str | None = None, standard: Path | None = None
) -> Trust:
    """Check the bundle's manifest against `key` (a PEM public key) and/or `expect` (its SHA-256):
    NotAuthenticated naming the manifest when it is not theirs. Then compare its rules with the
    registered standard at `standard` (default: this installation's data/)."""
    directory = Path(directory)
    try:
        manifest = regular_bytes(directory / MANIFEST)
    except OSError as exc:
        raise NotAuthenticated(f"bundle {MANIFEST}: unreadable ({exc})") from None
    found = hashlib.sha256(manifest).hexdigest()
    carried = _carried_signature(directory)
    said = []
    if expect is not None:
        if found != expect.strip().lower():
            raise NotAuthenticated(
                f"bundle {MANIFEST}: sha256 {found}, not the expected {expect.strip()}: this is not the published bundle"
            )
        said.append(f"manifest sha256 {found} as expected")
    if key is not None:
        public = signing.load_public(key)
        expected_by = signing.fingerprint(public)
        if carried is None:
            raise NotAuthenticated(
                f"bundle {MANIFEST}: not signed ({SIGNATURE} missing or unreadable), so it cannot be signed by {expected_by}"
            )
        if not carried.verifies_under(public, manifest):
            raise NotAuthenticated(
                f"bundle {MANIFEST}: its signature does not verify under {expected_by} (--key {key}): "
                "the manifest was rewritten or signed by another key"
            )
        said.append(f"signed by {expected_by}")
    return Trust(
        "; ".join(said) or None,
        carried.fingerprint if carried else None,
        rule_differences(directory / "rules", standard),
    )


def _carried_signature(directory: Path) -> "signing.Signature | None":
    try:
        return signing.signature_from(json.loads(regular_bytes(directory / SIGNATURE)))
    except (OSError, ValueError, AttributeError, signing.SigningError):
        return None


def rule_differences(bundled: Path, standard: Path | None = None) -> list[str]:
    """Each data file (and the lock) that differs between a bundle's rules/ and the registered
    standard, one line per file; empty when they are the same files."""
    ours = Registry(standard) if standard is not None else Registry()
    theirs = {p.relative_to(bundled).as_posix(): _sha(p) for p in sorted(Path(bundled).rglob("*")) if p.is_file()}
    mine = {rel: e.sha256 for rel, e in ours.files.items()}
    if ours.lock_path.is_file():
        mine[LOCK_NAME] = _sha(ours.lock_path)
    lines = []
    for rel in sorted(set(theirs) | set(mine)):
        if rel not in mine:
            lines.append(f"{rel}: only in the bundle")
        elif rel not in theirs:
            lines.append(f"{rel}: only in your registered standard")
        elif theirs[rel] != mine[rel]:
            lines.append(f"{rel}: differs (bundle sha256 {theirs[rel][:12]}, registered {mine[rel][:12]})")
    return lines


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
