"""A ruleset is all of its rules: every rule file comes from its `uses`, and a new ruleset that
changes one anchor flips exactly the cells that anchor decides, and only under that ruleset."""

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from judges.hard.rulesets import load_ruleset
from sabot.store.db import connect
from sabot.store.verdicts import read_verdicts
from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions
from sabot_assets.rescore import rescore_wave
from tests.registry_copy import CHANGED, NEW_RULESET, add_one_anchor_ruleset, copy_registry
from tests.test_rescore import WAVE, materializations, slice_corpus  # noqa: F401  (fixture)

ASSETS = (
    "preregistration",
    "baseline_runs",
    "fault_runs",
    "cell_verdicts",
    "later_readings",
    "judge_verdicts",
    "kappa_audit",
    "scoreboard",
    "report",
)

VERDICT = ("status", "excluded", "mapping", "flags_anchored", "detected_hard", "reacted", "recovered", "flags_noticed")


def newest_partition(instance, name) -> str:
    [record] = instance.fetch_materializations(dg.AssetKey([WAVE, name]), limit=1).records
    return record.partition_key


def verdicts(store_path, ruleset) -> dict:
    with connect(store_path, read_only=True) as con:
        return {(r["operator"], r["probe"]): tuple(r[k] for k in VERDICT) for r in read_verdicts(con, WAVE, ruleset)}


def test_every_rule_file_comes_from_the_rulesets_uses(registry, tmp_path):
    root = copy_registry(tmp_path)
    copied = add_one_anchor_ruleset(root)
    base, changed = load_ruleset(copied, "v0.2.0"), load_ruleset(copied, NEW_RULESET)
    task, op, old, new = CHANGED
    assert old in base.anchors(task, op) and new not in base.anchors(task, op)
    assert new in changed.anchors(task, op) and old not in changed.anchors(task, op)
    assert changed.hash != base.hash and "standard/anchors.v0.2.0-x1.json" in changed.files
    v013 = load_ruleset(registry, "v0.1.3")  # uses mappings and exclusions only
    assert (v013.flags, v013.anchor_sets, v013.strict) == (None, None, None)
    assert v013.precedence == ("RUN_ERROR", "BASELINE_FAIL", "INJECTION_UNVERIFIED")
    assert load_ruleset(registry, "v0.2.1").strict is not None and load_ruleset(registry, "v0.2.0").strict is None
    assert NEW_RULESET in copied.wave(WAVE).readings and NEW_RULESET not in copied.wave("public_wave1").readings


def test_a_ruleset_whose_uses_lack_what_its_rules_need_is_refused(tmp_path):
    import json

    root = copy_registry(tmp_path)
    doc = json.loads((root / "rulesets" / "v0.2.0.json").read_text())
    del doc["uses"]["anchors"]
    doc["version"] = "v0.2.0-noanchors"
    (root / "rulesets" / "v0.2.0-noanchors.json").write_text(json.dumps(doc))
    from sabot.registry import Registry

    with pytest.raises(
        ValueError, match=r"v0.2.0-noanchors.json: rules.flags_surface needs a flags and an anchors file in uses"
    ):
        load_ruleset(Registry(root), "v0.2.0-noanchors")


def test_one_changed_anchor_flips_exactly_its_cells_and_only_under_its_ruleset(registry, slice_corpus, tmp_path):  # noqa: F811
    store_path = tmp_path / "store.duckdb"
    store = DuckDBResource(database=str(store_path))
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        score_corpus(
            import_corpus(registry, build_definitions(registry, store), instance, store_path, slice_corpus, WAVE)
        )
        before = {r: verdicts(store_path, r) for r in ("v0.1.3", "v0.2.0", "v0.2.1")}
        with connect(store_path, read_only=True) as con:
            stored = {(r["operator"], r["probe"]): r for r in read_verdicts(con, WAVE, "v0.2.0")}

        counts = {n: materializations(instance, n) for n in ASSETS}

        # The user's path after a rule change: a new ruleset file, then `sabot wave rescore`.
        copied = add_one_anchor_ruleset(copy_registry(tmp_path))
        result = rescore_wave(copied, build_definitions(copied, store), instance, store_path, WAVE, NEW_RULESET)
        after = {r: verdicts(store_path, r) for r in ("v0.1.3", "v0.2.0", "v0.2.1", NEW_RULESET)}
        ran = {n: materializations(instance, n) - counts[n] for n in ASSETS}

    # Exactly the new ruleset's partition of later_readings (every stored cell in it), scoreboard and report,
    # in one Dagster run: no cell partition, no run, no judge verdict, no other reading.
    assert ran == {n: {"later_readings": 1, "scoreboard": 1, "report": 1}.get(n, 0) for n in ASSETS}
    assert newest_partition(instance, "later_readings") == NEW_RULESET
    assert (result.cells, result.runs, result.compared_with) == (30, 1, "v0.2.0")

    for ruleset in ("v0.1.3", "v0.2.0", "v0.2.1"):
        assert after[ruleset] == before[ruleset], f"{ruleset} moved although none of its files did"
    # Independently of the scorer: a cell flips when the old anchor was its only detecting evidence.
    task, op, old, _ = CHANGED
    v020 = load_ruleset(registry, "v0.2.0")
    expected = set()
    for key, row in stored.items():
        if key[0] != op or row["task"] != task or row["mapping"] or not row["flags_anchored"]:
            continue
        hits = {
            a
            for c in row["flags"]
            if v020.flags.is_noticed(c)
            for a in v020.anchors(task, op)
            if a.lower() in c.lower()
        }
        if hits == {old}:
            expected.add(key)
    flipped = {k for k in after[NEW_RULESET] if after[NEW_RULESET][k] != after["v0.2.0"][k]}
    assert expected and flipped == expected
    assert {tuple(f.cell.split("|")) for f in result.flips} == expected  # what the command prints
    for key in flipped:
        assert (
            after["v0.2.0"][key][VERDICT.index("detected_hard")]
            and not after[NEW_RULESET][key][VERDICT.index("detected_hard")]
        )
