"""A deterministic stand-in for the model (what the team's CI would use): answers from the prompt."""

import re


def _text(message) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content if isinstance(p, dict))


def make_responder(seed):
    def respond(request):
        messages = request["messages"]
        system = _text(messages[0])
        question = re.search(r"(\d+) \+ (\d+)", next(_text(m) for m in messages if m["role"] == "user"))
        if system.startswith("You are the worker"):
            if messages[-1]["role"] != "tool":
                return {"tool_calls": [{"name": "calculator", "arguments": {"expression": question.group(0)}}]}
            return _text(messages[-1])
        answer = [_text(m) for m in messages if m["role"] == "assistant" and m.get("name") == "worker" and _text(m)][
            -1
        ].strip()
        if messages[-1]["role"] != "tool":
            return {"tool_calls": [{"name": "check_answer", "arguments": {"answer": answer}}]}
        said = _text(messages[-1])
        if said == "saved":
            return "APPROVE: saved"
        right = question and answer == str(int(question.group(1)) + int(question.group(2)))
        if right and "is a number" in said:
            return {"tool_calls": [{"name": "save_answer", "arguments": {"answer": answer}}]}
        return f"REJECT: {answer} is not the sum"

    return respond
