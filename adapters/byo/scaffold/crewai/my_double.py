"""A deterministic stand-in for the model (what the crew's CI would use): answers from the prompt."""

import re


def make_responder(seed):
    def respond(request):
        messages = request["messages"]
        system, tools = messages[0]["content"], [m["content"] for m in messages if m["role"] == "tool"]
        task = next(m["content"] for m in messages if m["role"] == "user")
        question = re.search(r"(\d+) \+ (\d+)", task)
        if system.startswith("You are Worker"):
            if not tools:
                return {"tool_calls": [{"name": "calculator", "arguments": {"expression": question.group(0)}}]}
            return tools[-1]
        answer = task.rsplit("This is the context you're working with:\n", 1)[-1].strip()
        if not tools:
            return {"tool_calls": [{"name": "check_answer", "arguments": {"answer": answer}}]}
        if tools[-1] == "saved":
            return "The answer is right and saved.\nVERDICT: APPROVE"
        right = question and answer == str(int(question.group(1)) + int(question.group(2)))
        if right and "is a number" in tools[-1]:
            return {"tool_calls": [{"name": "save_answer", "arguments": {"answer": answer}}]}
        return f"VERDICT: REJECT - {answer} is not the sum"

    return respond
