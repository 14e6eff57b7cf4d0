"""Plug-ins: pipelines, operators, scripted responders, pass criteria and runners, registered by kind and name.

In the spirit of inspect_ai's `_util/registry.py`: one registry keyed by (kind, name). A plug-in
registers with a decorator (`@register("operator", "O1")`) or, lazily, with a "module:attr" target
that is imported only on first use, so loading the asset definitions never imports an agent
framework. Installed packages add plug-ins through entry points in the group `sabot.plugins`: the
entry point's name is "kind.name" and its value "module:attr" (`[project.entry-points."sabot.plugins"]`
in pyproject.toml), also resolved on first use.

A new operator therefore touches its own module and its own data: it registers itself here.
"""

import importlib
from collections.abc import Iterator, MutableMapping
from importlib import metadata

KINDS = ("pipeline", "operator", "responder", "pass_criterion", "runner")
ENTRY_POINT_GROUP = "sabot.plugins"

_targets: dict[tuple[str, str], object] = {}  # (kind, name) -> the object, or its "module:attr" path
_resolved: dict[tuple[str, str], object] = {}
_entry_points_loaded = False


class PluginError(LookupError):
    """An unknown kind or name, a duplicate registration, or a target that does not import."""


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise PluginError(f"unknown plug-in kind {kind!r}; kinds: {', '.join(KINDS)}")
    return kind


def register(kind: str, name: str, target=None, *, replace: bool = False):
    """Register `target` (an object or a "module:attr" string) as plug-in `name` of `kind`.

    Without a target, returns a decorator. Registering a different target under a taken name is
    refused unless `replace` (the same target again is a no-op, so re-imports are harmless).
    """
    key = (_kind(kind), name)

    def add(obj):
        current = _targets.get(key)
        if current is not None and current is not obj and current != obj and not replace:
            raise PluginError(
                f"{kind} {name!r} is already registered ({_describe(current)}); pass replace=True to override"
            )
        if isinstance(obj, str) and not obj.strip():
            raise PluginError(f"{kind} {name!r}: a lazy target is 'module:attr' (or a module), got {obj!r}")
        _targets[key] = obj
        _resolved.pop(key, None)
        return obj

    return add if target is None else add(target)


def unregister(kind: str, name: str) -> None:
    _targets.pop((_kind(kind), name), None)
    _resolved.pop((kind, name), None)


def _describe(target) -> str:
    return (
        target
        if isinstance(target, str)
        else f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__name__)}"
    )


def resolve_path(path: str, where: str = "plug-in"):
    """Import "module:attr" (attr may be dotted) and return the attribute; a bare "module" is the module."""
    module_name, sep, attr = path.partition(":")
    if not module_name or (sep and not attr):
        raise PluginError(f"{where}: expected 'module:attr', got {path!r}")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"{where}: cannot import module {module_name!r} ({exc})") from exc
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"{where}: module {module_name!r} has no attribute {attr!r}") from None
    return obj


def load_entry_points() -> None:
    """Register the entry points of installed packages (once; each stays lazy until looked up)."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        kind, sep, name = ep.name.partition(".")
        if not sep or kind not in KINDS:
            raise PluginError(
                f"entry point {ep.name!r} in group {ENTRY_POINT_GROUP}: its name must be 'kind.name' with kind one of {', '.join(KINDS)}"
            )
        if (kind, name) not in _targets:
            _targets[(kind, name)] = ep.value


def lookup(kind: str, name: str):
    """The plug-in object, importing its module on first use."""
    key = (_kind(kind), name)
    if key not in _targets:
        load_entry_points()
    if key not in _targets:
        raise PluginError(f"no {kind} named {name!r}; registered: {', '.join(names(kind)) or 'none'}")
    if key not in _resolved:
        target = _targets[key]
        _resolved[key] = resolve_path(target, f"{kind} {name!r}") if isinstance(target, str) else target
    return _resolved[key]


def target_path(kind: str, name: str) -> str | None:
    """The "module:attr" plug-in `name` resolves to, importing nothing (what another process imports
    to get the same object); None if it is not registered."""
    load_entry_points()
    target = _targets.get((_kind(kind), name))
    if target is None:
        return None
    return (
        target
        if isinstance(target, str)
        else f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
    )


def module_of(kind: str, name: str) -> str | None:
    """The module plug-in `name` lives in, importing nothing (a "module:attr" target is read, an
    object asked for its `__module__`); None if it is not registered."""
    load_entry_points()
    target = _targets.get((_kind(kind), name))
    if target is None:
        return None
    return target.partition(":")[0] if isinstance(target, str) else getattr(target, "__module__", None)


def names(kind: str) -> list[str]:
    load_entry_points()
    return sorted(n for k, n in _targets if k == _kind(kind))


def is_registered(kind: str, name: str) -> bool:
    load_entry_points()
    return (_kind(kind), name) in _targets


class Registered(MutableMapping):
    """A live mapping view of one kind: `name in view` imports nothing, `view[name]` resolves lazily;
    assigning registers (replacing), deleting unregisters (what tests patch)."""

    def __init__(self, kind: str):
        self.kind = _kind(kind)

    def __getitem__(self, name: str):
        if not is_registered(self.kind, name):
            raise KeyError(name)
        return lookup(self.kind, name)

    def __setitem__(self, name: str, target) -> None:
        register(self.kind, name, target, replace=True)

    def __delitem__(self, name: str) -> None:
        if not is_registered(self.kind, name):
            raise KeyError(name)
        unregister(self.kind, name)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and is_registered(self.kind, name)

    def __iter__(self) -> Iterator[str]:
        return iter(names(self.kind))

    def __len__(self) -> int:
        return len(names(self.kind))

    def __repr__(self) -> str:
        return f"Registered({self.kind!r}: {', '.join(names(self.kind))})"


def registered(kind: str) -> Registered:
    return Registered(kind)
