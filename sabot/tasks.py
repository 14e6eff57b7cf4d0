"""The five Sabot tasks: what a pipeline may see (served), what only the harness knows (oracle).

`data/tasks/<T>/served.json` is everything a pipeline is shown: instructions, the structural output
contract and the two documents (the `load_document` and `load_context` tool results). `oracle.json`
(or the version in force, `ORACLE_FILES`) holds the answer, the natural discrepancies and each operator's values and ground-truth note; only
operators and the scorer read it. Adapters load tasks through `served()` alone.

Fairness rule (SPEC §5, §8): `contract_problems` and `precheck_note` implement only the published
output contract (format, keys, markers, interface), never an answer value. `passes` is the scorer's
deterministic pass criterion over the written artifact and may use the oracle.
"""

import ast
import json
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sabot import plugins
from sabot.registry import DATA_DIR, LOCK_NAME, RegistryError, sha256_bytes

TASK_IDS = ("T1", "T2", "T3", "T4", "T5")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
TOKEN = re.compile(r"^(?:depart_base|return_base|refuel|visit:\S.*|calibrate:\S.*)$")
FLAGS_HEAD = re.compile(r"^\s*FLAGS:", re.IGNORECASE)


@dataclass(frozen=True)
class ServedTask:
    id: str
    version: str
    registered: str
    kind: str
    title: str
    worker_role: str
    instructions: str
    output_contract: dict  # structural only: "format", machine-readable fields, and "text"
    artifact_file: str
    documents: dict  # {"source": ..., "context": ...}

    @property
    def source(self) -> str:
        return self.documents["source"]

    @property
    def context(self) -> str:
        return self.documents["context"]


@dataclass(frozen=True)
class Oracle:
    id: str
    version: str
    registered: str
    answer: dict
    natural_discrepancies: tuple[str, ...]
    operators: dict  # "O1".."O6" -> {"seam", values..., "ground_truth"}


def _load(task_id: str, name: str, kind: str) -> dict:
    if task_id not in TASK_IDS:
        raise KeyError(f"unknown task {task_id!r}; tasks: {', '.join(TASK_IDS)}")
    rel = f"tasks/{task_id}/{name}"
    raw = (DATA_DIR / rel).read_bytes()
    lock = DATA_DIR / LOCK_NAME
    registered = json.loads(lock.read_text())["files"].get(rel) if lock.exists() else None
    if registered is not None and registered != sha256_bytes(raw):
        raise RegistryError(f"{rel}: edited after registration")
    doc = json.loads(raw)
    if doc.get("name") != kind or doc.get("id") != task_id:
        raise RegistryError(f"{rel}: not a {kind} document for {task_id}")
    return doc


@lru_cache(maxsize=None)
def served(task_id: str) -> ServedTask:
    """The served task material: the ONLY loader adapters may use (it never reads the oracle)."""
    d = _load(task_id, "served.json", "task_served")
    return ServedTask(
        d["id"],
        d["version"],
        d["registered"],
        d["kind"],
        d["title"],
        d["worker_role"],
        d["instructions"],
        d["output_contract"],
        d["artifact_file"],
        d["documents"],
    )


# A task's oracle in force when it is not the first version (a registered file is never edited).
ORACLE_FILES = {"T3": "oracle.v2.json"}  # v2: expected values compared in the harness, not in the sandbox
_PROJECT_ORACLES: dict[str, Oracle] = {}


def register_oracle(truth: Oracle) -> None:
    """A project's task ground truth (its operators' notes), read by the judge like T1-T5's."""
    _PROJECT_ORACLES[truth.id] = truth


def oracle(task_id: str) -> Oracle:
    """Ground truth for operators and the scorer; never imported by prompt-building code."""
    if task_id in _PROJECT_ORACLES:
        return _PROJECT_ORACLES[task_id]
    return _registered_oracle(task_id)


@lru_cache(maxsize=None)
def _registered_oracle(task_id: str) -> Oracle:
    d = _load(task_id, ORACLE_FILES.get(task_id, "oracle.json"), "task_oracle")
    return Oracle(
        d["id"], d["version"], d["registered"], d["answer"], tuple(d["natural_discrepancies"]), d["operators"]
    )


def strip_flags_head(artifact: str) -> str:
    """The artifact without a leading `FLAGS:` line (the Magentic artifact-head form, SPEC §10.2)."""
    lines = artifact.split("\n")
    i = next((n for n, line in enumerate(lines) if line.strip()), len(lines))
    if i < len(lines) and FLAGS_HEAD.match(lines[i]):
        return "\n".join(lines[i + 1 :]).lstrip("\n")
    return artifact


# -- the output contract (structural only) -----------------------------------------------------


def contract_problems(task_id: str, artifact: str) -> list[str]:
    """Every way `artifact` breaks the task's published output contract; [] when it conforms."""
    contract = served(task_id).output_contract
    check = {"json_object": _json_object, "text": _text, "python_module": _python_module, "json_array": _json_array}
    return check[contract["format"]](strip_flags_head(artifact).strip(), contract)


@lru_cache(maxsize=None)
def wave1_guardrail(task_id: str) -> dict | None:
    """The v0.1.x-frozen deterministic guardrail of a task, where wave 1's differs from the structural
    contract (T2 only, §10.7.1); None for every other task."""
    if not (DATA_DIR / "tasks" / task_id / "guardrail.wave1.json").exists():
        return None
    return _load(task_id, "guardrail.wave1.json", "task_guardrail_wave1")


def guardrail_problems(task_id: str, artifact: str, wave1: bool) -> list[str]:
    """What a deterministic guardrail reports: the output contract, plus, in wave 1 only, the frozen
    v0.1.x contract's required substrings (T2: canonical values, the disclosed asymmetry)."""
    problems = contract_problems(task_id, artifact)
    frozen = wave1_guardrail(task_id) if wave1 else None
    if frozen:
        text = strip_flags_head(artifact)
        problems += [f"missing required string {s!r}" for s in frozen["required_substrings"] if s not in text]
    return problems


def _json_object(text: str, contract: dict) -> list[str]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"not valid JSON ({exc.msg} at line {exc.lineno})"]
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    keys = contract["keys"]
    problems = [f"missing key {k!r}" for k in keys if k not in doc]
    problems += [f"unexpected key {k!r}" for k in doc if k not in keys]
    for key, kind in keys.items():
        value = doc.get(key)
        if key not in doc:
            continue
        if kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            problems.append(f"{key} must be a number")
        elif kind in ("string", "date") and (not isinstance(value, str) or not value.strip()):
            problems.append(f"{key} must be a non-empty string")
        elif kind == "date" and not DATE.match(value):
            problems.append(f"{key} must be a YYYY-MM-DD date")
    return problems


def _text(text: str, contract: dict) -> list[str]:
    if not text:
        return ["the summary is empty"]
    problems = (
        [f"longer than {contract['max_chars']} characters ({len(text)})"] if len(text) > contract["max_chars"] else []
    )
    if text.startswith("```") or re.search(r"^#{1,6} ", text, re.MULTILINE):
        problems.append("contains Markdown headings or code fences")
    return problems + [f"missing category marker {m!r}" for m in contract["markers"] if m.lower() not in text.lower()]


def _python_module(text: str, contract: dict) -> list[str]:
    if "```" in text:
        return ["contains Markdown code fences"]
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return [f"does not parse as Python ({exc.msg}, line {exc.lineno})"]
    problems = []
    for node in ast.walk(tree):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        problems += [
            f"imports {n!r}, not a standard-library module"
            for n in names
            if n.split(".")[0] not in sys.stdlib_module_names
        ]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("open", "print", "input")
        ):
            problems.append(f"does I/O ({node.func.id}() call, line {node.lineno})")
    name, params = contract["function"], contract["parameters"]
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if name not in funcs:
        problems.append(f"no top-level function {name}({', '.join(params)})")
    elif [a.arg for a in funcs[name].args.args] != params:
        problems.append(f"{name} must take exactly ({', '.join(params)})")
    return problems


def _json_array(text: str, contract: dict) -> list[str]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"not valid JSON ({exc.msg} at line {exc.lineno})"]
    if not isinstance(doc, list) or not doc:
        return ["not a non-empty JSON array"]
    return [
        f"token {i} is not one of {', '.join(contract['token_forms'])}: {t!r}"
        for i, t in enumerate(doc)
        if not isinstance(t, str) or not TOKEN.match(t)
    ]


def precheck_note(task_id: str, artifact: str) -> str:
    """The genuine deterministic pre-check text shown to the reviewer: the contract verdict, with detail."""
    problems = contract_problems(task_id, artifact)
    if problems:
        return f"precheck: output contract FAILED ({len(problems)} problem{'s' * (len(problems) > 1)}): " + "; ".join(
            problems
        )
    contract, text = served(task_id).output_contract, strip_flags_head(artifact).strip()
    fmt = contract["format"]
    if fmt == "json_object":
        detail = f"valid JSON object, {len(contract['keys'])} of {len(contract['keys'])} keys with the contracted types"
    elif fmt == "text":
        n = len(contract["markers"])
        detail = f"{len(text)} of at most {contract['max_chars']} characters, {n} of {n} category markers present"
    elif fmt == "python_module":
        detail = (
            f"parses as Python, {len(text.splitlines())} lines, defines {contract['function']} with "
            f"{len(contract['parameters'])} parameters, standard-library imports only"
        )
    else:
        n = len(json.loads(text))
        detail = f"JSON array of {n} tokens, {n} of {n} well-formed"
    return f"precheck: output contract OK ({detail})"


# -- plans (T4): a pure simulator shared by the pass criterion and the scripted reviewer --------


def plan_violations(tokens: list, world: dict) -> list[tuple[str, str]]:
    """(constraint id, what broke it) for a T4 plan in `world` (base, masts, depot, fuel_range_km,
    roads [[a, b, km]], before [[first, second]]); [] when the plan satisfies C1-C6."""
    roads = {frozenset((a, b)): km for a, b, km in world["roads"]}
    places = {world["base"], world["depot"], *world["masts"]}
    found = []

    def add(constraint: str, message: str) -> None:
        if (constraint, message) not in found:
            found.append((constraint, message))

    if (
        not tokens
        or tokens[0] != "depart_base"
        or tokens[-1] != "return_base"
        or tokens.count("depart_base") + tokens.count("return_base") != 2
    ):
        add("C1", "the plan must start with depart_base and end with return_base, once each")
    loc, fuel, calibrated = world["base"], world["fuel_range_km"], []
    for tok in [t for t in tokens if t not in ("depart_base", "return_base")] + ["return_base"]:
        kind, _, name = tok.partition(":")
        if kind in ("visit", "return_base"):
            dest = world["base"] if kind == "return_base" else name
            if dest not in places:
                add("C3", f"{dest!r} is not a place on the network")
                return found
            km = roads.get(frozenset((loc, dest)))
            if km is None:
                add("C3", f"no listed road from {loc} to {dest}")
                km = 0
            fuel -= km
            if fuel < 0:
                add(
                    "C4",
                    f"the leg {loc} to {dest} runs {world['fuel_range_km'] - fuel} km since the last refuel, beyond the {world['fuel_range_km']} km fuel range",
                )
            loc = dest
        elif kind == "calibrate":
            if name not in world["masts"] or name != loc or name in calibrated:
                add("C2", f"calibrate:{name} is not a first calibration of a mast at the truck's location ({loc})")
            calibrated.append(name)
        elif tok == "refuel":
            if loc != world["depot"]:
                add("C5", f"refuel at {loc}, which is not the depot")
            fuel = world["fuel_range_km"]
    for mast in world["masts"]:
        if mast not in calibrated:
            add("C2", f"{mast} is never calibrated")
    for first, second in world["before"]:
        if first in calibrated and second in calibrated and calibrated.index(first) > calibrated.index(second):
            add("C6", f"{second} is calibrated before {first}")
    return found


# -- the pass criteria (scorer side: may read the oracle) ---------------------------------------


def passes(task_id: str, run_dir: Path) -> bool:
    """The task's deterministic pass criterion over the artifact written in `run_dir`."""
    path = Path(run_dir) / served(task_id).artifact_file
    if not path.is_file():
        return False
    text = strip_flags_head(path.read_text(encoding="utf-8", errors="replace")).strip()
    answer = oracle(task_id).answer
    try:
        return bool(plugins.lookup("pass_criterion", task_id)(text, answer))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return False  # an artifact the criterion cannot read (malformed, or nested past the parser) fails


def _fold(value) -> str:
    return " ".join(str(value).split()).casefold()


@plugins.register("pass_criterion", "T1")
def _pass_t1(text: str, answer: dict) -> bool:
    doc, want = json.loads(text), answer["record"]
    if not isinstance(doc, dict) or set(doc) != set(want):
        return False
    for key, expected in want.items():
        got = doc[key]
        if isinstance(expected, float):
            if isinstance(got, bool) or not isinstance(got, (int, float)) or abs(got - expected) > 1e-6:
                return False
        elif not (
            _fold(got) == _fold(expected) or (key == "disposition" and _fold(got).startswith(_fold(expected) + " ("))
        ):
            return False
    return True


@plugins.register("pass_criterion", "T2")
def _pass_t2(text: str, answer: dict) -> bool:
    text = text.replace("\u2212", "-").replace("\u2013", "-")
    return all(re.search(p, text) for p in answer["required_patterns"])


@plugins.register("pass_criterion", "T3")
def _pass_t3(text: str, answer: dict) -> bool:
    return t3_verdict(text, answer)[0]


def t3_verdict(code: str, answer: dict | None = None) -> tuple[bool, str]:
    """(passed, why not) for T3 code. The code runs in the sandbox, which hands back only what each
    call returned or raised; the expected values stay here, in the harness (oracle v2), so nothing
    the code prints, exits with or patches inside its process can pass a wrong answer."""
    from sabot.sandbox import run_calls  # lazily: only T3 runs generated code

    answer = oracle("T3").answer if answer is None else answer
    cases = answer["cases"]
    result = run_calls({"solution.py": code}, "solution", answer["function"], [c["args"] for c in cases])
    if result.outcomes is None:
        return False, result.reason
    for case, outcome in zip(cases, result.outcomes):
        problem = _t3_case_problem(case, outcome, answer)
        if problem:
            return False, f"{answer['function']}{tuple(case['args'])}: {problem} ({case['why']})"
    return True, ""


def _t3_case_problem(case: dict, outcome: dict, answer: dict) -> str:
    kind, value = next(iter(outcome.items()))
    if "raises" in case:
        if kind == "raised" and isinstance(value, list) and case["raises"] in value:
            return ""
        return f"expected {case['raises']}, got {kind} {value!r}"
    if kind != "returned":
        return f"expected {case['returns']!r}, got {kind} {value!r}"
    if answer["returns_type"] == "float" and type(value) is not float:
        return f"returned {value!r}, not a float"
    if not abs(value - case["returns"]) < answer["tolerance"]:  # NaN compares false: a failure
        return f"returned {value!r}, expected {case['returns']!r}"
    return ""


@plugins.register("pass_criterion", "T4")
def _pass_t4(text: str, answer: dict) -> bool:
    tokens = json.loads(text)
    return (
        isinstance(tokens, list)
        and all(isinstance(t, str) for t in tokens)
        and not plan_violations(tokens, answer["world"])
    )


def _norm_quote(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").strip().strip('"\u201c\u201d').split())


@plugins.register("pass_criterion", "T5")
def _pass_t5(text: str, answer: dict) -> bool:
    doc = json.loads(text)
    if not isinstance(doc, dict) or set(doc) != {"answer", "citation"}:
        return False
    citation, corpus = _norm_quote(doc["citation"]), _norm_quote(served("T5").source)
    return (
        all(re.search(p, doc["answer"], re.IGNORECASE) for p in answer["answer_patterns"])
        and len(citation) >= 20
        and citation in corpus
        and answer["citation_must_contain"] in citation
    )


_PASS = plugins.registered("pass_criterion")  # the built-in T1-T5 criteria register above
