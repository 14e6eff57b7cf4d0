"""Seals are checked once per command: inside one command an attempt verified against its seal is
not hashed again; a refused attempt is refused at every read with the same line; the next command
verifies everything again."""

import json

import pytest

from sabot import runroot
from sabot.seal import SealError
from sabot_assets.waves.sealed_reads import once_per_command, read_verified
from tests.test_sealed_evidence import FAULT_SLOT, sliced, store_copy  # noqa: F401  (fixtures: one live slice)

BASELINE_SLOT = "demo/langgraph/default/T1/baseline/seed11"


def _edit(attempt_dir, name):
    path = attempt_dir / name
    record = json.loads(path.read_text())
    record["task_passed"] = not record["task_passed"]
    path.write_text(runroot.run_file_text(record))


def test_an_attempt_is_verified_once_per_command_and_a_refusal_at_every_read(store_copy):  # noqa: F811
    run_root = store_copy / "runroot"
    baseline, fault = run_root / BASELINE_SLOT / "attempt-1", run_root / FAULT_SLOT / "attempt-1"
    _edit(fault, "runresult.json")
    with once_per_command():
        verified = read_verified(run_root, baseline)
        _edit(baseline, "baseline-runresult.json")
        assert read_verified(run_root, baseline) is verified  # the command's verified read, not the file read again
        refusals = []
        for _ in range(2):
            with pytest.raises(SealError) as refused:
                read_verified(run_root, fault)
            refusals.append(str(refused.value))
        assert refusals[0] == refusals[1] and "differs from its seal" in refusals[0]
    with pytest.raises(SealError, match="differs from its seal"):  # the next command checks again
        read_verified(run_root, baseline)
