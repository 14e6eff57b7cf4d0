"""Two `wave run` commands on one store, at a provider that bills every call the most its request allows
(an honest provider at its worst: far above what the store's recorded runs cost), never pass the §8 cap
or a shared `--budget` between them: every run reserves its registered worst case in the store's spend
ledger before it launches, and the gateway holds each call to that worst case before sending it."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from sabot.store.db import connect
from sabot.store.ledger import SpendLedger, ledger_path
from sabot.store.spend import stored_costs
from tests.fault_provider import FaultProvider

PROJECT = Path(__file__).resolve().parents[1]
KEY = "sk-proj-SHARED-cap-9b3f"
WAVE = ["wave", "run", "demo", "--framework", "langgraph", "--seed", "11", "--concurrency", "2"]
LEFT = 6.5  # margined USD left under the ceiling: one run's registered worst case ($6.00 margined) fits, two do not
MARGIN = 2.0  # data/standard/spend_margin.v1.json


def _env(var: Path, provider: FaultProvider) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_DEBUG")
    }
    return {**env, "SABOT_VAR": str(var), "SABOT_MODEL_BASE_URL": provider.base_url, "SABOT_MODEL_API_KEY": KEY}


def _settled(var: Path) -> float:
    """Metered provider spend the store's ledger counts, every stored record synced into it."""
    ledger = SpendLedger(ledger_path(var / "sabot.duckdb"), "test")
    with connect(var / "sabot.duckdb", read_only=True) as con:
        ledger.sync(stored_costs(con))
    return ledger.totals("provider")[0]


@pytest.mark.parametrize("ceiling", ["the project cap", "a shared budget"])
def test_two_commands_at_a_dear_provider_never_pass_the_ceiling_between_them(tmp_path, ceiling):
    var = tmp_path / "var"
    with FaultProvider(
        "slow", delay=0.0
    ) as cheap:  # the store learns what a langgraph run costs: the scripted model's usage
        recorded = subprocess.run(
            [str(PROJECT / ".venv/bin/sabot"), *WAVE, "--config", "default", "--task", "T1"],
            env=_env(var, cheap),
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    before = _settled(var)
    assert 0 < before * MARGIN < 0.5  # a recorded rate far below what the dear provider will bill
    if ceiling == "the project cap":
        # Spend of earlier waves, as the ledger holds it, leaving LEFT under the $500 cap.
        SpendLedger(ledger_path(var / "sabot.duckdb"), "test").sync(
            {"earlier|||waves": ("provider", (500 - LEFT) / MARGIN - before)}
        )
        budget, limit = [], 500.0
    else:
        budget, limit = ["--budget", str(LEFT)], before * MARGIN + LEFT

    with FaultProvider("max-usage", delay=0.2) as dear:
        commands = [
            subprocess.Popen(
                [str(PROJECT / ".venv/bin/sabot"), *WAVE, "--config", config, "--task", "T2", "--task", "T3", *budget],
                env=_env(var, dear),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for config in ("default", "guardrail")
        ]
        outputs = [command.communicate(timeout=900) for command in commands]
        answered = dear.answered
    said = "\n".join(out + err for out, err in outputs)
    ceilings = [float(c.replace(",", "")) for c in re.findall(r"ceiling \(?\$([\d,.]+)", said)]
    assert len(ceilings) >= 2 and max(ceilings) <= limit + 0.01, said[-3000:]
    spent = _settled(var) * MARGIN
    assert answered > 0 and spent > (
        500 - LEFT if ceiling == "the project cap" else before * MARGIN
    )  # the dear provider was paid
    assert "stopped launching at the spend ceiling" in said, said[
        -3000:
    ]  # the ceiling, not the selection, ended the commands
    assert spent <= limit + 1e-9, (spent, limit, said[-3000:])


def test_a_provider_billing_past_each_requests_limits_is_named_first_when_spend_passes_the_ceiling(tmp_path):
    """The one exception: a provider billing a call beyond what its request allows (here 200 times its
    counted prompt and max_tokens) can take spend past the ceiling once that call is sent; the command's
    first words say so, and every call it paid is stored."""
    var = tmp_path / "var"
    with FaultProvider("max-usage", usage_scale=200) as overbilling:
        done = subprocess.run(
            [str(PROJECT / ".venv/bin/sabot"), *WAVE, "--config", "default", "--task", "T1", "--budget", str(LEFT)],
            env=_env(var, overbilling),
            capture_output=True,
            text=True,
            timeout=600,
        )
        answered = overbilling.answered
    first = done.stderr.splitlines()[0] if done.stderr else ""
    assert done.returncode == 1 and first.startswith("demo: stopped launching at the spend ceiling"), (
        done.stdout[-2000:] + done.stderr[-2000:]
    )
    assert "Spend passed the ceiling" in first and "billed calls past their own request's limits" in first, first
    with connect(var / "sabot.duckdb", read_only=True) as con:
        stored = con.execute(
            "SELECT count(*) FROM model_calls WHERE wave = 'demo' AND status = 200 AND cost_usd > 0"
        ).fetchone()[0]
    assert answered > 0 and stored == answered and _settled(var) * MARGIN > LEFT
