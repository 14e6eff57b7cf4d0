"""What a wave that met its spend ceiling says first: how many runs stay missing, and, when the
store's spend passed the ceiling anyway, the one reason it can.

Every provider run reserves its registered worst case in the store's ledger before it launches, and
the gateway holds each call to its own worst case (its prompt counted before it is sent, plus its
max_tokens, at its model's registered price) before sending it. An honest provider therefore cannot
take the ledger past the ceiling, however many commands share the store; a provider billing a call
beyond what its request allows can, and the stop message names it as that exception.
"""

from pathlib import Path

from sabot.budget import usd
from sabot.store.ledger import ledger_path, spend_ledger
from sabot_assets.waves.budget import is_simulated, kind
from sabot_assets.waves.concurrency import host_label

BEYOND_THE_REQUEST = (
    "the provider billed calls past their own request's limits (the prompt counted before each call plus its max_tokens, "
    "at the registered price): the one case a reservation made before each call cannot hold"
)


def margined_spend(store_path: Path, endpoint_label: str, margin: float) -> float:
    """Margined spend the store's ledger holds at this kind of endpoint. Read from the ledger alone, never the
    store: another command may hold the store's lock, and every run this command made settled into the ledger."""
    return spend_ledger(ledger_path(store_path), host_label()).totals(kind(is_simulated(endpoint_label)))[0] * margin


def ceiling_stop_line(name: str, ceiling: float, not_launched: int, spent: float) -> str:
    """The stop message of a wave whose launches the ceiling ended (`spent`: margined spend after the wave)."""
    line = (
        f"{name}: stopped launching at the spend ceiling ({usd(ceiling)}): {not_launched} run(s) not launched stay missing, "
        f"not RUN_ERROR; `sabot wave run {name}` with a larger --budget resumes them"
    )
    return line + passed_ceiling(ceiling, spent)


def passed_ceiling(ceiling: float | None, spent: float) -> str:
    """'' while spend is within the ceiling; else the sentence naming by how much and why (every call is stored and priced)."""
    if ceiling is None or spent <= ceiling + 1e-9:
        return ""
    return (
        f". Spend passed the ceiling: {usd(spent)} margined against {usd(ceiling)}, because {BEYOND_THE_REQUEST}; "
        "every such call is stored and priced (`sabot explain` lists a run's calls)"
    )
