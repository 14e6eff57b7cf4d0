"""Running a team's compiled LangGraph graph as it is, reading acts from the surfaces its mapping names.

The graph is streamed with stream_mode ["updates", "tasks", "values"] (langgraph 1.2.9):
  node_output  a node's update whose `field` matches `pattern` (a reviewer's verdict token);
  routing      the task that starts right after node `from` finished is node `to` (Command(goto=...)
               or a conditional edge: the route the graph actually took), reason from `from`'s update;
  rerun        node `node` starting for the second time or later, reason from its input state;
  interrupt    the `__interrupt__` key (langgraph.types.interrupt), reason = the interrupt's value.
The output handed to the pass criterion is the final state (the last `values` chunk).
"""

from adapters.byo.surfaces import Acts, matches

INTERRUPT_KEY = "__interrupt__"
GRAPH_ENDS = ("__start__", "__end__")


def parts(graph) -> dict[str, set[str]]:
    """What a mapping may name in a compiled graph: its nodes."""
    return {"node": {n for n in getattr(graph, "nodes", None) or () if n not in GRAPH_ENDS}}


def run(graph, inputs: dict, acts: Acts, where) -> dict:
    state, finished, updates, starts = dict(inputs), None, {}, {}
    for mode, chunk in graph.stream(inputs, stream_mode=["updates", "tasks", "values"]):
        if mode == "values":
            state = chunk
        elif mode == "tasks" and "input" in chunk:  # a task starting
            name = chunk["name"]
            starts[name] = starts.get(name, 0) + 1
            where.node = name
            for i, s in acts.of("routing"):
                if finished == s["from"] and name == s["to"]:
                    acts.act(i, s, (updates.get(s["from"]) or {}).get(s.get("reason_field", ""), None))
            for i, s in acts.of("rerun"):
                if name == s["node"] and starts[name] > 1:
                    acts.act(i, s, (chunk.get("input") or {}).get(s.get("reason_field", ""), None))
        elif mode == "tasks":  # a task finished
            finished = chunk["name"]
        elif mode == "updates":
            for node, update in chunk.items():
                if node == INTERRUPT_KEY:
                    for i, s in acts.of("interrupt"):
                        for item in update:
                            acts.act(i, s, getattr(item, "value", item))
                    continue
                updates[node] = update if isinstance(update, dict) else {}
                for i, s in acts.of("node_output"):
                    value = updates[node].get(s.get("field", ""))
                    if node == s["node"] and matches(s, value if isinstance(value, str) else None):
                        acts.act(i, s, updates[node].get(s.get("reason_field", ""), value))
    return dict(state or {})
