"""The crew's test double; the seed picks the story: 1 the writer is fixed by its guardrail's retry,
2 the writer never meets its guardrail (CrewAI gives up), 3 as 1, then the reviewer rejects."""


def make_responder(seed):
    def respond(request):
        messages = request["messages"]
        system = messages[0]["content"]
        tools = [m["content"] for m in messages if m["role"] == "tool"]
        user = "\n".join(m["content"] for m in messages if m["role"] == "user")
        if system.startswith("You are Guardrail Agent"):
            return '{"valid": true, "feedback": null}'
        if system.startswith("You are Writer"):
            if not tools:
                return {
                    "tool_calls": [
                        {"name": "fetch_fact", "arguments": {"topic": "Elbe"}},
                        {"name": "word_count", "arguments": {"text": "The Elbe"}},
                    ]
                }
            retried = "Previous attempt failed validation" in user
            return f"SUMMARY: {tools[0]}" if seed != 2 and retried else tools[0]
        if tools:
            return "Published.\nVERDICT: APPROVE"
        if seed == 3 or "1094" not in user:
            return "VERDICT: REJECT - the length does not match the atlas"
        return {"tool_calls": [{"name": "publish", "arguments": {"text": user.rsplit("\n", 1)[-1]}}]}

    return respond
