"""The model exchanges an attempt that did not complete kept: a run killed in flight (finished as
`stopped` from its exchange journal), cut off by its registered call bound while looping on a fault,
or ended in RUN_ERROR. A cell's record shows only its current run's exchanges; these are the calls
that explain why an earlier attempt never finished, and every one of them was paid."""

import json


def kept_exchanges(con, wave: str, operator: str, probe: str) -> dict[int, list[dict]]:
    """attempt number -> the exchanges its record kept, for every attempt of the slot that did not complete."""
    rows = con.execute(
        "SELECT attempt, record::VARCHAR FROM attempts WHERE wave = ? AND operator = ? AND probe = ? AND outcome <> 'complete' "
        "ORDER BY attempt",
        [wave, operator, probe],
    ).fetchall()
    return {attempt: json.loads(record).get("exchanges") or [] for attempt, record in rows}
