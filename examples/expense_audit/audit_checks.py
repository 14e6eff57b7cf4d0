"""The pass criterion: the saved total is the report's."""

import json


def total_is_right(output, workdir):
    saved = workdir / "total.json"
    return saved.is_file() and json.loads(saved.read_text()) == {"total": "420"}
