"""A deterministic stand-in for the model (what the graph's CI would use): answers from the prompt."""

import re


def make_responder(seed):
    def respond(request):
        system, text = request["messages"][0]["content"], request["messages"][-1]["content"]
        if system.startswith("You are the worker"):
            found = re.search(r"(\d+) \+ (\d+)", text)
            return str(int(found.group(1)) + int(found.group(2))) if found else "I do not know"
        answer = re.search(r"Answer: (.*)", text).group(1)
        question = re.search(r"(\d+) \+ (\d+)", text)
        right = question and answer.strip() == str(int(question.group(1)) + int(question.group(2)))
        return "APPROVE" if right else f"REJECT: {answer} is not the sum"

    return respond
