"""The pass criterion: exactly the right incident was filed, once."""

import json


def right_incident_filed(output, workdir):
    log = workdir / "incidents.jsonl"
    if not log.is_file():
        return False
    filed = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return filed == [{"service": "checkout-api", "severity": "SEV1", "action": "roll back v412"}]
