"""The pass criterion: exactly the right supplier reached the ERP, once, with the policy's cap."""

import json

EXPECTED = [{"company": "Nordwind Logistics GmbH", "contract_cap_eur": 250000}]


def supplier_onboarded_correctly(output, workdir):
    log = workdir / "onboarded_suppliers.jsonl"
    if not log.is_file():
        return False, f"nothing was onboarded; the crew ended with: {output.get('failed') or output.get('raw')}"
    onboarded = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return onboarded == EXPECTED, f"onboarded {onboarded}, expected {EXPECTED}"
