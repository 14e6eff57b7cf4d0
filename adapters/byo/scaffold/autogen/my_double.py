"""A deterministic stand-in for the model (what the team's CI would use): answers from the prompt."""

import re


def make_responder(seed):
    def respond(request):
        messages = request["messages"]
        system = messages[0]["content"]
        tools = [m["content"] for m in messages if m["role"] == "tool"]
        question = re.search(r"(\d+) \+ (\d+)", next(m["content"] for m in messages if m["role"] == "user"))
        if system.startswith("You are the worker"):
            if messages[-1]["role"] != "tool":
                return {"tool_calls": [{"name": "calculator", "arguments": {"expression": question.group(0)}}]}
            return messages[-1]["content"]
        answer = [m["content"] for m in messages if m["role"] == "user" and m.get("name") == "worker"][-1].strip()
        if messages[-1]["role"] != "tool":
            return {"tool_calls": [{"name": "check_answer", "arguments": {"answer": answer}}]}
        if tools[-1] == "saved":
            return "APPROVE: saved"
        right = question and answer == str(int(question.group(1)) + int(question.group(2)))
        if right and "is a number" in tools[-1]:
            return {"tool_calls": [{"name": "save_answer", "arguments": {"answer": answer}}]}
        return f"REJECT: {answer} is not the sum"

    return respond
