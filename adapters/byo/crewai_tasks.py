"""How a mapping names a task of a team's crew without the crew being edited: by its `name`, else
by its position (`#1` is the crew's first task), else by a stable prefix of its description (the
description as written, before CrewAI fills in the kickoff's inputs, cut at a word boundary).
`sabot project check` shows each task's addresses."""

import json

PREFIX_CHARACTERS = 40  # long enough to tell a crew's tasks apart, short enough to type


def description_prefix(task) -> str:
    """The first words of the task's description as written, up to PREFIX_CHARACTERS."""
    text = " ".join((getattr(task, "_original_description", None) or task.description or "").split())
    if len(text) <= PREFIX_CHARACTERS:
        return text
    cut = text[: PREFIX_CHARACTERS + 1].rsplit(" ", 1)[0]
    return cut or text[:PREFIX_CHARACTERS]


def _addressed(crew) -> list[tuple[str, str | None, str, str | None]]:
    """(task id, name, position, description prefix) per task; a prefix two tasks share is None."""
    tasks = list(getattr(crew, "tasks", None) or ())
    prefixes = [description_prefix(t) for t in tasks]
    return [
        (str(t.id), t.name or None, f"#{i}", p if p and prefixes.count(p) == 1 else None)
        for i, (t, p) in enumerate(zip(tasks, prefixes), 1)
    ]


def addresses(crew) -> dict[str, tuple[str, ...]]:
    """Task id -> every address of that task: its name, its position, its description prefix."""
    return {
        task_id: tuple(a for a in (name, position, prefix) if a) for task_id, name, position, prefix in _addressed(crew)
    }


def shown(crew) -> str:
    """The tasks as `project check` lists them: `write (#1, "Summarise what is on file about")`."""
    parts = []
    for _, name, position, prefix in _addressed(crew):
        others = ", ".join([position] + ([json.dumps(prefix)] if prefix else []))
        parts.append(f"{name} ({others})" if name else f"{position} ({json.dumps(prefix)})" if prefix else position)
    return "; ".join(parts) or "none"
