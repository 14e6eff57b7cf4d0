"""Per-cell checks: a cell's verdict and its evidence seal are evaluated on its own partition.

The seal check against a real sealed attempt (tmp run root): it passes when the verdict read the
sealed record, and fails naming the file when the record was edited or the verdict read another.
"""

import dagster as dg

from sabot import runroot
from sabot.matrix import Probe
from sabot.runroot import Identity
from sabot.trace import RunRecord
from sabot_assets.waves.cell_checks import SEAL_CHECK, seal_evaluation, verdict_evaluation

ASSET = dg.AssetKey(["demo", "cell_verdicts"])
KEY = "O5|langgraph.default.T1.s11"


def _sealed(tmp_path):
    directory = runroot.allocate(tmp_path, "demo", Probe("langgraph", "default", "T1", 11), "O5")
    record = RunRecord("demo-run", "langgraph", "default", "T1", "O5", 11, (), None, False, True, None, extra={})
    identity = Identity("runner-v1", "simulation (scripted model on 127.0.0.1)", "gpt-5.6-terra", "gpt-5.6-luna", 2)
    runroot.write_attempt(directory, "demo", record, "complete", identity, [], "dagster-run-1", runroot.started_now())
    return runroot.read_attempt(tmp_path, directory)


def test_the_seal_check_passes_only_for_the_sealed_record_the_verdict_read(tmp_path):
    attempt = _sealed(tmp_path)
    head = {"fault_sha256": attempt.sha256, "ruleset": "v0.2.0", "status": "valid"}
    good = seal_evaluation(ASSET, KEY, tmp_path, head, attempt.source_path)
    assert (good.passed, good.partition, good.check_name) == (True, KEY, SEAL_CHECK)
    other = seal_evaluation(ASSET, KEY, tmp_path, {**head, "fault_sha256": "0" * 64}, attempt.source_path)
    assert not other.passed and "the verdict read 000000000000" in other.description
    (attempt.directory / "runresult.json").write_text(
        (attempt.directory / "runresult.json").read_text().replace("demo-run", "demo-rum")
    )
    edited = seal_evaluation(ASSET, KEY, tmp_path, head, attempt.source_path)
    assert not edited.passed and "runresult.json differs from its seal" in edited.description
    none = seal_evaluation(ASSET, KEY, tmp_path, {**head, "fault_sha256": None}, None)
    assert not none.passed and none.severity == dg.AssetCheckSeverity.ERROR


def test_the_verdict_check_fails_only_when_an_input_is_missing():
    valid = verdict_evaluation(ASSET, KEY, {"status": "valid", "ruleset": "v0.2.0"}, "valid", "MISSED")
    assert valid.passed and valid.description == "valid; §2 outcome: MISSED"
    excluded = verdict_evaluation(
        ASSET, KEY, {"status": "excluded", "ruleset": "v0.2.0"}, "excluded: RUN_ERROR", "not counted"
    )
    assert excluded.passed  # an itemized exclusion is a verdict
    missing = verdict_evaluation(
        ASSET, KEY, {"status": "incomplete", "ruleset": "v0.2.0"}, "incomplete: baseline (not materialized)", ""
    )
    assert (
        not missing.passed
        and missing.description == "incomplete: baseline (not materialized)"
        and missing.severity == dg.AssetCheckSeverity.WARN
    )
