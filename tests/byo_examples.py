"""The example projects under examples/, as the bring-your-own-pipeline tests find them: one list, so
that the tests of their waves and the tests of their registration walk the same examples."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.parent.parent for p in (ROOT / "examples").glob("*/sabot/project.json"))
