"""The model ids a built pipeline asks for, read from the framework clients it holds (LangChain's
ChatOpenAI, CrewAI's LLM, AutoGen's and Agent Framework's OpenAI clients), before any call: a budget must know every model
it will pay for. Found by walking what the pipeline references (its nodes, agents, the closures of
its node functions), never a module or a class: the team's code is not edited or imported again."""

import gc
import types

CLIENT_PACKAGES = (
    "langchain_openai",
    "crewai",
    "autogen_ext",
    "agent_framework",
)  # a prefix: agent_framework_openai too
WALK_LIMIT = 200_000  # objects; a built pipeline references a few thousand


def _model_of(obj) -> str | None:
    for attr in ("model_name", "model"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    create_args = getattr(obj, "_create_args", None)  # AutoGen's OpenAIChatCompletionClient
    return (
        create_args.get("model")
        if isinstance(create_args, dict) and isinstance(create_args.get("model"), str)
        else None
    )


def requested_models(pipeline) -> set[str]:
    """Every model id a client reachable from the pipeline is configured with."""
    found, seen, stack = set(), set(), [pipeline]
    while stack and len(seen) < WALK_LIMIT:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type)):
            continue
        seen.add(id(obj))
        if type(obj).__module__.startswith(CLIENT_PACKAGES):
            model = _model_of(obj)
            if model:
                found.add(model.removeprefix("openai/"))  # CrewAI's LLM may carry its provider as a prefix
        if isinstance(obj, types.FunctionType):  # its closure, not its module's globals
            stack.extend(gc.get_referents(*(obj.__closure__ or ())))  # an empty cell has no referent
            continue
        stack.extend(gc.get_referents(obj))
    return found
