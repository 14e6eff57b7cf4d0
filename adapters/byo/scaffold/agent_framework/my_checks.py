"""The pass criterion: a mechanical check of what the pipeline left behind."""

import json


def passes(output, workdir):
    saved = workdir / "answer.json"
    return saved.is_file() and json.loads(saved.read_text()) == {"answer": "4"}
