"""What a provider's answer means for a wave, read from the registered `standard/provider_errors.v1.json`.

Three kinds, one decision per answer:
- retryable: the same request may succeed later (429, 408/409, 5xx, timeouts, connection errors);
  retried under the call policy, and counted by the endpoint's breaker (adapters/gateway/limiter.py);
- endpoint_fatal: no call to the endpoint can succeed until the user acts (401, 403, a 429 whose body
  says the quota or billing is exhausted): the wave stops at once, its cells stay missing;
- cell_fatal: this request cannot succeed (404 for a model, 400, 422): that run is RUN_ERROR.

A failure crosses process boundaries as a `ProviderFailure`, a plain record (never a live client
exception: those do not survive pickling), its message scrubbed of every secret it could carry.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

TAXONOMY_DOC = "standard/provider_errors.v1.json"
RETRYABLE, ENDPOINT_FATAL, CELL_FATAL = "retryable", "endpoint_fatal", "cell_fatal"
REDACTED = "[redacted]"
# An Authorization value, however a provider echoes it: a header line, a JSON field, a bare bearer token.
_AUTH_VALUE = re.compile(
    r'(?i)((?:"|\b)(?:authorization|x-api-key|api-key)"?\s*[:=]\s*"?)(?:bearer\s+|basic\s+)?[^\s",}]+'
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{6,}")


@dataclass(frozen=True)
class ProviderTaxonomy:
    retryable: frozenset[int]
    endpoint_fatal: frozenset[int]
    endpoint_fatal_markers: dict[int, tuple[str, ...]]  # status -> body markers that make it endpoint-fatal
    cell_fatal: frozenset[int]
    defaults: dict[str, str]  # "4xx" | "5xx" -> kind

    @classmethod
    def from_doc(cls, doc: dict, source: str = TAXONOMY_DOC) -> "ProviderTaxonomy":
        try:
            markers = {
                int(status): tuple(m.lower() for m in words)
                for status, words in doc["endpoint_fatal"].get("body_markers", {}).items()
            }
            taxonomy = cls(
                frozenset(map(int, doc["retryable"]["status"])),
                frozenset(map(int, doc["endpoint_fatal"]["status"])),
                markers,
                frozenset(map(int, doc["cell_fatal"]["status"])),
                dict(doc["class_defaults"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{source}: malformed provider error taxonomy ({type(exc).__name__}: {exc})") from None
        unknown = set(taxonomy.defaults.values()) - {RETRYABLE, ENDPOINT_FATAL, CELL_FATAL}
        if unknown:
            raise ValueError(f"{source}: class_defaults name unknown kinds {sorted(unknown)}")
        return taxonomy

    @classmethod
    def load(cls, registry) -> "ProviderTaxonomy":
        return cls.from_doc(registry.doc(TAXONOMY_DOC))

    @classmethod
    def registered(cls) -> "ProviderTaxonomy":
        """The registered file as shipped (for a gateway built without a registry at hand)."""
        return _shipped()

    def kind_of(self, status: int, body: str = "") -> str:
        """The kind of an HTTP answer with this status and body text (2xx never reaches here)."""
        markers = self.endpoint_fatal_markers.get(status)
        if markers and any(m in (body or "").lower() for m in markers):
            return ENDPOINT_FATAL
        for kind, statuses in (
            (ENDPOINT_FATAL, self.endpoint_fatal),
            (CELL_FATAL, self.cell_fatal),
            (RETRYABLE, self.retryable),
        ):
            if status in statuses:
                return kind
        return self.defaults.get(f"{status // 100}xx", CELL_FATAL)


@lru_cache(maxsize=1)
def _shipped() -> ProviderTaxonomy:
    path = Path(__file__).resolve().parents[2] / "data" / TAXONOMY_DOC
    return ProviderTaxonomy.from_doc(json.loads(path.read_text()), str(path))


@dataclass(frozen=True)
class ProviderFailure:
    """One provider failure as data: what a run's child hands back, what the breaker stores."""

    kind: str  # retryable | endpoint_fatal | cell_fatal | breaker_open | retry_after
    status: int | None
    endpoint: str
    model: str | None
    message: str

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> "ProviderFailure":
        return cls(doc["kind"], doc.get("status"), doc.get("endpoint", ""), doc.get("model"), doc.get("message", ""))


def provider_message(body: str) -> str:
    """The human part of an error body: OpenAI's error.message where there is one, else the text."""
    try:
        doc = json.loads(body)
    except (TypeError, ValueError):
        return (body or "").strip()[:500]
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:500]
    if isinstance(error, str):
        return error[:500]
    return json.dumps(doc)[:500]


def _escaped_forms(secret: str) -> re.Pattern:
    """The secret however a body may spell it: each character as itself, a JSON `\\uXXXX` escape (any
    case), `\\/` for a slash, or a URL `%XX`, mixed freely. Replacing this in the raw text leaves
    nothing that decoding could turn back into the key."""

    def forms(char: str) -> str:
        code = ord(char)
        alternatives = [re.escape(char)]
        if code < 0x10000:
            alternatives.append(rf"\\u(?i:{code:04x})")
        if char == "/":
            alternatives.append(r"\\/")
        if code < 0x80:
            alternatives.append(rf"%(?i:{code:02x})")
        return "(?:" + "|".join(alternatives) + ")"

    return re.compile("".join(forms(c) for c in secret))


class Scrubber:
    """Replaces the key and any Authorization value in text, bytes or decoded JSON before it is stored
    or logged: in the raw text in every escaped spelling, and again in every string once decoded."""

    def __init__(self, *secrets: str | None):
        self.secrets = tuple(sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True))
        self._spellings = tuple(_escaped_forms(s) for s in self.secrets)

    def text(self, value: str, patterns: bool = True) -> str:
        """`value` with every secret replaced; with `patterns`, any Authorization-like value too (for
        error bodies, headers and messages, never a model's answer: code it writes may say `api_key=`)."""
        for secret, spellings in zip(self.secrets, self._spellings):
            value = value.replace(secret, REDACTED)
            if "\\" in value or "%" in value:  # only an escaped spelling is left to find
                value = spellings.sub(REDACTED, value)
        if patterns:
            value = _AUTH_VALUE.sub(lambda m: m.group(1) + REDACTED, value)
            value = _BEARER.sub(lambda m: m.group(1) + REDACTED, value)
        return value

    def data(self, raw: bytes, patterns: bool = True) -> bytes:
        if not raw:
            return raw
        text = raw.decode("utf-8", errors="surrogateescape")
        cleaned = self.text(text, patterns)
        return raw if cleaned == text else cleaned.encode("utf-8", errors="surrogateescape")

    def decoded(self, value, patterns: bool = True):
        """A decoded JSON value (or SSE chunk list) with every string in it scrubbed, keys included."""
        if isinstance(value, str):
            return self.text(value, patterns)
        if isinstance(value, list):
            return [self.decoded(v, patterns) for v in value]
        if isinstance(value, dict):
            return {self.decoded(k, patterns): self.decoded(v, patterns) for k, v in value.items()}
        return value

    def headers(self, headers) -> dict[str, str]:
        return {name.lower(): self.text(str(value)) for name, value in headers.items()}
