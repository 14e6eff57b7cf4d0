"""The standard as data: loading `data/`, content hashes, and the registration lock.

Every JSON file under `data/` is a registered artifact. `data/registry.lock.json` records the
SHA-256 each file had when it was registered; a registered file is never edited in place (a change
is a new dated version under a new name), so verification names any file whose bytes moved.
"""

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sabot.matrix import Cell, Probe, probes

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
LOCK_NAME = "registry.lock.json"


class RegistryError(ValueError):
    """The registry on disk is malformed or no longer matches what was registered."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class RegistryFile:
    path: str  # relative to the data root, with forward slashes
    sha256: str
    doc: dict


@dataclass(frozen=True)
class WaveDef:
    """A registered wave: its matrix, where its runs come from, and how it is scored."""

    name: str
    source: str  # "import" (filled from a reference corpus) or "live"
    corpus_dir: str | None
    protocol: int
    seeds: tuple[int, ...]
    frameworks: tuple[str, ...]
    configs: tuple[str, ...]
    tasks: tuple[str, ...]
    operators: tuple[str, ...]
    carveouts: tuple[
        tuple[str, str, frozenset[str]], ...
    ]  # (framework, config, operators) of each registered carve-out
    headline_ruleset: str
    readings: tuple[str, ...]  # the registered readings, then the later ones
    label: str
    project: bool = False  # a team's own pipeline (`sabot.projects`): no instrument check, no cross-framework reading
    later_readings: tuple[str, ...] = ()  # rulesets added after registration that name the wave in `rescores`

    @property
    def registered_readings(self) -> tuple[str, ...]:
        """The readings the wave registered: fixed for its life, so each cell partition carries them."""
        return tuple(v for v in self.readings if v not in self.later_readings)

    def probes(self) -> list[Probe]:
        return probes(self.frameworks, self.configs, self.tasks, self.seeds)

    def cell_keys(self) -> list[tuple[str, str, str, str, int]]:
        """(framework, config, task, operator, seed) of every cell the wave scores (carve-out removed):
        what a verdict over the whole wave needs present."""
        return [
            (p.framework, p.config, p.task, op, p.seed)
            for p in self.probes()
            for op in self.operators
            if not self.is_carved_out(Cell(op, p))
        ]

    def carveout_of(self, cell: Cell) -> tuple[str, str, frozenset[str]] | None:
        """The registered carve-out that removes `cell`, if one does."""
        p = cell.probe
        return next(
            (c for c in self.carveouts if p.framework == c[0] and p.config == c[1] and cell.operator in c[2]), None
        )

    def is_carved_out(self, cell: Cell) -> bool:
        return self.carveout_of(cell) is not None


class Registry:
    """Read-only view of `data/`, loaded once; accessors fail loudly on a missing entry."""

    def __init__(self, root: Path = DATA_DIR):
        self.root = Path(root)
        self.files: dict[str, RegistryFile] = {}
        for path in sorted(self.root.rglob("*.json")):
            rel = path.relative_to(self.root).as_posix()
            if rel == LOCK_NAME:
                continue
            raw = path.read_bytes()
            try:
                doc = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise RegistryError(f"{path}: not valid JSON ({exc})") from exc
            self.files[rel] = RegistryFile(rel, sha256_bytes(raw), doc)
        self.standard_hashes = {
            rel: e.sha256 for rel, e in self.files.items()
        }  # before any project lays files over them

    def doc(self, rel: str) -> dict:
        try:
            return self.files[rel].doc
        except KeyError:
            raise RegistryError(f"{self.root / rel}: not in the registry") from None

    def field(self, rel: str, *path: str):
        value = self.doc(rel)
        for i, key in enumerate(path):
            if not isinstance(value, dict) or key not in value:
                raise RegistryError(f"{self.root / rel}: missing field {'.'.join(path[: i + 1])}")
            value = value[key]
        return value

    def fresh(self) -> "Registry":
        """The same registry re-read from disk (what a registration check compares)."""
        return Registry(self.root)

    # -- the registration lock -------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK_NAME

    def locked_hashes(self) -> dict[str, str]:
        if not self.lock_path.exists():
            return {}
        return json.loads(self.lock_path.read_text())["files"]

    def lock_problems(self) -> list[str]:
        """Every difference between the files on disk and the registration lock, by file."""
        locked, problems = self.locked_hashes(), []
        for rel, entry in self.files.items():
            if rel not in locked:
                problems.append(f"{rel}: not registered (run `sabot registry lock`)")
            elif locked[rel] != entry.sha256:
                problems.append(
                    f"{rel}: edited after registration (sha256 {entry.sha256[:12]}, registered {locked[rel][:12]})"
                )
        problems += [f"{rel}: registered but missing on disk" for rel in locked if rel not in self.files]
        return problems

    def require_registered(self) -> None:
        """Refuse to run a wave against a registry that no longer matches its registration."""
        problems = self.lock_problems()
        if problems:
            raise RegistryError("the registry no longer matches its registration:\n  " + "\n  ".join(problems))

    def require_still_registered(self, rels=None) -> None:
        """Refuse to score with files that are not what was registered: as this registry loaded them
        (a long-lived process may hold rules read before an edit), and as they are on disk now.

        `rels` limits the check to the files a scorer reads (cheap: one read and hash per file);
        the message is the one `require_registered` gives the command line.
        """
        locked = self.locked_hashes()
        rels = sorted(self.files) if rels is None else sorted(rels)
        problems = []
        for rel in rels:
            path = self.root / rel
            on_disk = sha256_bytes(path.read_bytes()) if path.exists() else None
            loaded = self.files[rel].sha256 if rel in self.files else None
            if rel not in locked:
                problems.append(f"{rel}: not registered (run `sabot registry lock`)")
            elif on_disk is None:
                problems.append(f"{rel}: registered but missing on disk")
            elif on_disk != locked[rel]:
                problems.append(
                    f"{rel}: edited after registration (sha256 {on_disk[:12]}, registered {locked[rel][:12]})"
                )
            elif loaded != locked[rel]:
                problems.append(
                    f"{rel}: loaded while edited (sha256 {(loaded or 'absent')[:12]}, registered {locked[rel][:12]}); reload the definitions"
                )
        if problems:
            raise RegistryError("the registry no longer matches its registration:\n  " + "\n  ".join(problems))

    def require_pinned(self, open_store) -> None:
        """Refuse to score against a store that pinned another registration of these rules
        (`open_store()`: a context manager yielding a connection). The lock lives beside the rules,
        so the store pins each registered file's sha256 when it first meets it (`pin_standard`).
        A project adds its own pin (`sabot.project_registry`)."""
        with open_store() as con:
            pin_standard(con, self.standard_hashes)

    def write_lock(self) -> list[str]:
        """Register new files. Refuses to re-register a changed file: a change is a new version."""
        locked = self.locked_hashes()
        edited = [rel for rel, e in self.files.items() if rel in locked and locked[rel] != e.sha256]
        if edited:
            raise RegistryError(
                f"registered file(s) edited in place: {', '.join(edited)}; add a new dated version instead"
            )
        added = sorted(rel for rel in self.files if rel not in locked)
        hashes = {rel: e.sha256 for rel, e in sorted(self.files.items())}
        self.lock_path.write_text(json.dumps({"files": hashes}, indent=1) + "\n")
        return added

    @cached_property
    def content_hash(self) -> str:
        """One hash over every registered file: what a wave's pre-registration pins."""
        return self.content_hash_without(())

    def content_hash_without(self, excluded) -> str:
        """`content_hash` less the files in `excluded` (what a result made from the rest depends on)."""
        lines = "".join(f"{rel} {e.sha256}\n" for rel, e in sorted(self.files.items()) if rel not in excluded)
        return sha256_bytes(lines.encode())

    # -- accessors --------------------------------------------------------------------------

    def anchors(self, task: str, operator: str, rel: str = "standard/anchors.v0.2.0.json") -> tuple[str, ...]:
        """Anchors of one registered anchors file (by default the §10.4 wave-2 sets), for tools and
        tests; the scorer never calls this: it reads the anchors file its ruleset `uses`."""
        return tuple(self.field(rel, "anchors", task, operator))

    def ruleset_doc(self, version: str) -> RegistryFile:
        rel = f"rulesets/{version}.json"
        if rel not in self.files:
            raise RegistryError(f"unknown ruleset {version!r}; registered: {', '.join(self.ruleset_names())}")
        return self.files[rel]

    def ruleset_names(self) -> list[str]:
        return sorted(
            r.removeprefix("rulesets/").removesuffix(".json") for r in self.files if r.startswith("rulesets/")
        )

    def readings(self, wave: str, registered: list[str]) -> tuple[str, ...]:
        """A wave's registered readings, then every later ruleset that names the wave in `rescores`:
        a new rule is a new ruleset file, and a registered wave is never edited to add it."""
        return tuple(registered) + self.later_readings(wave, registered)

    def later_readings(self, wave: str, registered: list[str]) -> tuple[str, ...]:
        return tuple(
            v
            for v in self.ruleset_names()
            if v not in registered and wave in self.files[f"rulesets/{v}.json"].doc.get("rescores", ())
        )

    def wave_names(self) -> list[str]:
        return sorted(r.removeprefix("waves/").removesuffix(".json") for r in self.files if r.startswith("waves/"))

    def joining(self, wave: str) -> list[dict]:
        """The registered waves that add their rows to `wave` (`joins`): a candidate framework joins the
        demo by a later registration, and the demo's own file is never edited to add it."""
        return [
            self.files[f"waves/{n}.json"].doc
            for n in self.wave_names()
            if wave in self.files[f"waves/{n}.json"].doc.get("joins", ())
        ]

    def _carveout(self, rel: str) -> tuple[str, str, frozenset[str]]:
        c = self.doc(rel)
        return c["framework"], c["config"], frozenset(c["operators"])

    def wave(self, name: str) -> WaveDef:
        rel = f"waves/{name}.json"
        if rel not in self.files:
            raise RegistryError(
                f"unknown wave {name!r}; registered waves: {', '.join(self.wave_names())} (register one under data/waves/)"
            )
        doc = self.files[rel].doc
        frameworks, carveouts = (
            list(doc["frameworks"]),
            [self._carveout(doc["carveout"])] if doc.get("carveout") else [],
        )
        for joiner in self.joining(name):
            if (joiner["configs"], joiner["tasks"], joiner["operators"], joiner["protocol"]) != (
                doc["configs"],
                doc["tasks"],
                doc["operators"],
                doc["protocol"],
            ):
                raise RegistryError(
                    f"data/waves/{joiner['name']}.json: joins {name} but its configs, tasks, operators or protocol differ from data/{rel}"
                )
            frameworks += [f for f in joiner["frameworks"] if f not in frameworks]
            carveouts += [self._carveout(joiner["carveout"])] if joiner.get("carveout") else []
        return WaveDef(
            name=doc["name"],
            source=doc["source"],
            corpus_dir=doc.get("corpus_dir"),
            protocol=doc["protocol"],
            seeds=tuple(self.field(doc["seeds"], "seeds")),
            frameworks=tuple(frameworks),
            configs=tuple(doc["configs"]),
            tasks=tuple(doc["tasks"]),
            operators=tuple(doc["operators"]),
            carveouts=tuple(carveouts),
            headline_ruleset=doc["headline_ruleset"],
            readings=self.readings(doc["name"], doc["readings"]),
            label=doc["label"],
            project=bool(doc.get("project", False)),
            later_readings=self.later_readings(doc["name"], doc["readings"]),
        )


# -- the standard's registration pinned in the store ---------------------------------------------
# The lock lives in the code tree beside the rules it freezes: whoever can edit a rule can edit the
# lock too, and the lock check alone then passes. The store keeps its own copy of every registered
# file's sha256 from the first time it met that file (as it does a project's, `sabot.project_registry`), so
# runs and verdicts already stored are never scored again under a rule registered anew. New files
# (a new dated version under a new name, the only way the standard changes) are pinned as they
# appear; a pinned file whose registered bytes moved, or that is gone, is refused naming the lock.


class StandardPinError(RegistryError):
    """The standard's registration differs from the one this store pinned."""


def pin_standard(con, files: dict[str, str]) -> list[str]:
    """Check `files` (path -> sha256, as loaded and registered) against the store's pin, pinning any
    file met for the first time (returned). Raises StandardPinError naming every moved or missing file."""
    pinned = dict(con.execute("SELECT path, sha256 FROM standard_registration").fetchall())
    problems = [
        f"{rel}: registered as sha256 {files[rel][:12]}, but this store pinned {sha[:12]}"
        for rel, sha in sorted(pinned.items())
        if rel in files and files[rel] != sha
    ]
    problems += [f"{rel}: pinned by this store but no longer registered" for rel in sorted(pinned) if rel not in files]
    if problems:
        raise StandardPinError(
            f"data/{LOCK_NAME}: the standard's registration differs from the one this store pinned; its stored runs and "
            "verdicts belong to that registration (a changed rule is a new dated file, never an edit):\n  "
            + "\n  ".join(problems)
        )
    new = sorted(rel for rel in files if rel not in pinned)
    if new:
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        con.executemany(
            "INSERT INTO standard_registration VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [[rel, files[rel], now] for rel in new],
        )
    return new
