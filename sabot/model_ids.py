"""Which served model ids count as a pinned role's model (SPEC §8, §10.7.2): the pin or a dated snapshot.

The O4 landing probe asks whether the downgraded client served a call. Providers report the
model that served, and may report a dated snapshot of the pinned alias; exact membership would make
every such O4 cell INJECTION_UNVERIFIED. The accepted forms are registered data
(`data/standard/model_ids.v1.json`, our reading, dated), never a guess in code.
"""

import re
from functools import lru_cache

MODEL_IDS = "standard/model_ids.v1.json"


@lru_cache(maxsize=8)
def _patterns(registry) -> dict[str, re.Pattern]:
    roles = registry.field(MODEL_IDS, "roles")
    return {role: re.compile(spec["served_as"]) for role, spec in roles.items()}


def served_pattern(registry, role: str) -> re.Pattern:
    """The registered pattern of served ids that count as `role`'s model."""
    patterns = _patterns(registry)
    if role not in patterns:
        raise KeyError(f"data/{MODEL_IDS}: no role {role!r} (have {', '.join(sorted(patterns))})")
    return patterns[role]


def served_as(registry, role: str, model_id: str | None) -> bool:
    """True when `model_id` (as a provider reported it) is `role`'s pinned model or its dated snapshot."""
    return isinstance(model_id, str) and served_pattern(registry, role).fullmatch(model_id) is not None


def downgrade_served(registry, model_ids) -> bool:
    """§10.7.2: did the O4 downgrade target serve any of these calls?"""
    return any(served_as(registry, "o4_downgrade_model", m) for m in model_ids)
