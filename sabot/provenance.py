"""What produced a wave's runs: the label every board, stop message and spend line carries.

Each run was made against one model endpoint, recorded with it as a label (`adapters.endpoint`):
the scripted model (or a project's test double), a provider, a loopback endpoint registered as a
local model server, or a replay of stored exchanges. A board's label is read from those runs,
counted: one kind names itself, several make a named mix with counts, so a board never calls
provider runs simulation nor simulated runs a finding.
"""

from collections import Counter
from collections.abc import Iterable

SIMULATION, PROVIDER, LOCAL_MODEL, REPLAY = "simulation", "provider", "local model", "replay"
# A provider-only board: real numbers, but a Sabot Score also needs a tagged spec revision's pinned
# versions, model ids and registered seeds (docs/providers.md).
DERIVED = "derived"
NO_RUNS = "no runs"
LOCAL_MODEL_PREFIX = "local model "  # the endpoint label of a loopback server registered as a local model
REPLAY_PREFIX = "replay of "  # adapters.run_attempt.REPLAY_ENDPOINT_PREFIX: "replay of <run> (<its endpoint>)"


def endpoint_kind(endpoint: str) -> str:
    """simulation | provider | local model | replay (<the kind it replays>) of one endpoint label."""
    if endpoint.startswith(REPLAY_PREFIX):
        recorded = endpoint[endpoint.find("(") + 1 :] if "(" in endpoint else ""
        return f"{REPLAY} ({endpoint_kind(recorded) if recorded else 'unknown'})"
    if endpoint.startswith(SIMULATION):
        return SIMULATION
    if endpoint.startswith(LOCAL_MODEL_PREFIX):
        return LOCAL_MODEL
    return PROVIDER


def kinds(endpoints: Iterable[str | None]) -> Counter:
    """Runs per kind; a run with no endpoint on record is counted as unknown, never as simulation."""
    return Counter(endpoint_kind(e) if e else "unknown" for e in endpoints)


def provenance_label(counts: Counter) -> str:
    """A board's label from its runs' kinds: the one kind (provider runs: "derived"), or a mix
    named with its counts, e.g. "mix: provider 3, simulation 18"."""
    counts = Counter({k: n for k, n in counts.items() if n})
    if not counts:
        return NO_RUNS
    if len(counts) == 1:
        (kind,) = counts
        return DERIVED if kind == PROVIDER else kind
    return "mix: " + ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))


def is_simulated(label: str | None) -> bool:
    """Whether any number under this label came from a simulated model (a mix or a replay of one
    included): then no median, band, Sabot Score or prediction verdict is drawn from it."""
    return label is not None and SIMULATION in label
