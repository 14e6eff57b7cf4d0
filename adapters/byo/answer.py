"""What a team's pipeline process hands back, checked field by field before the run's record uses it.

The answer comes from the scored party's own process (adapters/byo/confine.py): it arrives as JSON,
never unpickled, and here every field the harness reads is checked for the type it needs. A forged
or garbled answer is that run's failure (`AnswerRefused`, a `ChildDied`), naming the field; it can
never raise something unexpected in the harness.
"""

from adapters.byo.confine import AnswerRefused


def _require(holds: bool, what: str) -> None:
    if not holds:
        raise AnswerRefused(f"the pipeline's process handed back a malformed answer: {what}")


def _texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def run_answer(doc) -> dict:
    """One run's answer (adapters.byo.confined_work.in_pipeline_process), its fields of the types the
    record needs: events as (clock, agent, kind, payload), the tools wrapped, the verdict as
    {"passed", "output"}; or {"infrastructure": text}."""
    _require(isinstance(doc, dict), "not a JSON object")
    if "infrastructure" in doc:
        _require(isinstance(doc["infrastructure"], str), "'infrastructure' is not text")
        return {"infrastructure": doc["infrastructure"]}
    events = doc.get("events")
    _require(isinstance(events, list), "'events' is not a list")
    for i, event in enumerate(events):
        _require(
            isinstance(event, list)
            and len(event) == 4
            and _whole(event[0])
            and isinstance(event[1], str)
            and isinstance(event[2], str)
            and isinstance(event[3], dict),
            f"event {i} is not [clock, agent, kind, payload]",
        )
    _require(_texts(doc.get("tools_wrapped")), "'tools_wrapped' is not a list of text")
    verdict = doc.get("pass")
    _require(
        isinstance(verdict, dict)
        and isinstance(verdict.get("passed"), bool)
        and isinstance(verdict.get("output"), str),
        '\'pass\' is not {"passed": bool, "output": text}',
    )
    return {
        "events": [tuple(event) for event in events],
        "tools_wrapped": list(doc["tools_wrapped"]),
        "pass": {"passed": verdict["passed"], "output": verdict["output"]},
    }


def built_answer(doc) -> tuple[list[str], str | None, set[str]]:
    """The static check's answer (adapters.byo.check._built_names): (problems, what was built, model ids)."""
    _require(isinstance(doc, list) and len(doc) == 3, "not [problems, built, models]")
    problems, built, models = doc
    _require(_texts(problems), "the problems are not a list of text")
    _require(built is None or isinstance(built, str), "what was built is not text")
    _require(_texts(models), "the model ids are not a list of text")
    return problems, built, set(models)
