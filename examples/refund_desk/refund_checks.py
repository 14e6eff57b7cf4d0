"""The refund desk's pass criterion: exactly the right refund reached the ledger, once."""

import json


def refund_paid_correctly(output, workdir):
    ledger = workdir / "refund_ledger.jsonl"
    if not ledger.is_file():
        return False
    entries = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    return entries == [{"order_id": "A-1001", "amount": 79.0}]
