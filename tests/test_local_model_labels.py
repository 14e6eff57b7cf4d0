"""A local model server's runs are labelled as a local model's: "local model <id it reports>", spend $0
"local" unless its user prices it, never simulation (so never a score or band either)."""

import pytest

from adapters.endpoint import provider_from_env
from sabot.pricing import call_rows, local_price_table, spend_text, totals
from sabot.provenance import LOCAL_MODEL, PROVIDER, SIMULATION, endpoint_kind
from tests.odd_replies import MODEL_ID, OddReplyServer

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500}


def test_a_local_server_is_labelled_by_the_id_it_reports(monkeypatch):
    with OddReplyServer("empty") as server:
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", server.base_url)
        monkeypatch.setenv("SABOT_MODEL_LOCAL", "1")
        monkeypatch.delenv("SABOT_MODEL_API_KEY", raising=False)  # a local server needs no key
        endpoint = provider_from_env("gpt-5.6-terra", "gpt-5.6-luna")
        label = endpoint.label
    assert endpoint.local_model and label == f"local model {MODEL_ID} at {server.base_url}"
    assert endpoint_kind(label) == LOCAL_MODEL
    assert [endpoint_kind(x) for x in ("simulation (scripted model on 127.0.0.1)", f"provider {server.base_url}")] == [
        SIMULATION,
        PROVIDER,
    ]


def test_the_flag_can_carry_the_id_so_a_busy_server_is_not_asked(monkeypatch):
    monkeypatch.setenv("SABOT_MODEL_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: asking would fail
    monkeypatch.setenv("SABOT_MODEL_LOCAL", "gemma-3-270m-q4_k_m")
    assert provider_from_env("a", "b").label == "local model gemma-3-270m-q4_k_m at http://127.0.0.1:9/v1"


def test_a_local_model_flag_on_a_remote_address_is_refused_naming_both(monkeypatch):
    monkeypatch.setenv("SABOT_MODEL_BASE_URL", "http://203.0.113.7:8088/v1")
    monkeypatch.setenv("SABOT_MODEL_LOCAL", "1")
    with pytest.raises(
        ValueError,
        match=r"SABOT_MODEL_LOCAL is set but SABOT_MODEL_BASE_URL=http://203.0.113.7:8088/v1 is not a loopback",
    ):
        provider_from_env("a", "b")


def test_local_spend_is_zero_and_local_unless_priced(monkeypatch):
    exchanges = [{"n": 1, "model": "gpt-5.6-terra", "status": 200, "usage": USAGE}]
    free = local_price_table({})
    rows = call_rows(exchanges, free, 1)
    assert rows[0]["cost_usd"] == 0.0, "priced at $0, not left unpriced"
    spend = {
        **totals(rows, free.source),
        "endpoints": ["local model gemma-3-270m-q4_k_m at http://127.0.0.1:8088/v1"],
        "by_kind": {LOCAL_MODEL: {"calls": 1, "cost_usd": 0.0}},
    }
    line = spend_text(spend, None)
    assert (
        line.startswith("spend (local model usage: $0 local unless SABOT_LOCAL_MODEL_PRICE prices it): $0.0000")
        and "simulat" not in line
    )
    priced = local_price_table({"SABOT_LOCAL_MODEL_PRICE": "0.10,0.40"})
    assert call_rows(exchanges, priced, 1)[0]["cost_usd"] == pytest.approx((1000 * 0.10 + 500 * 0.40) / 1e6)
    with pytest.raises(ValueError, match="SABOT_LOCAL_MODEL_PRICE='free': expected INPUT,OUTPUT"):
        local_price_table({"SABOT_LOCAL_MODEL_PRICE": "free"})


def test_a_local_model_board_draws_no_median_and_no_band_even_when_every_row_is_decided(registry):
    from judges.hard.scoreboard import median_entry
    from tests.test_section2_funnel import SIX, row

    full = [row(framework=r.split("/")[0], config=r.split("/")[1], hard=True) for r in SIX]
    assert median_entry(registry, full, "derived", SIX)["band"] is not None, "the same cells from a provider are banded"
    for label in ("local model", "mix: local model 3, provider 9"):
        entry = median_entry(registry, full, label, SIX)
        assert entry["value"] is None and entry["band"] is None and "local model server" in entry["withheld"], entry
