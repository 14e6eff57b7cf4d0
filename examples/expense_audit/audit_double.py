"""The team's test double: a deterministic audit manager and accountant, answering from the prompt."""

import json
import re

LINE = re.compile(r"^([a-z]+): (\d+)$", re.MULTILINE)
TOTAL = re.compile(r"TOTAL: (\d+)")


def _text(message) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content if isinstance(p, dict))


def _ledger(satisfied: bool, progress: bool, why: str, instruction: str) -> str:
    entry = lambda reason, answer: {"reason": reason, "answer": answer}
    return json.dumps(
        {
            "is_request_satisfied": entry(why, satisfied),
            "is_in_loop": entry(why, not progress),
            "is_progress_being_made": entry(why, progress),
            "next_speaker": entry("The accountant totals.", "accountant"),
            "instruction_or_question": entry("The plan's next step.", instruction),
        }
    )


def _manager(messages) -> str:
    last = _text(messages[-1])
    reports = [
        _text(m)
        for m in messages
        if m.get("role") == "assistant" and m.get("name") == "accountant" and TOTAL.search(_text(m))
    ]
    if "pure JSON format" in last:
        if not reports:
            return _ledger(
                False,
                True,
                "Just starting.",
                "Load the expense report, total it, save the total and reply with every line and the total.",
            )
        lines, total = [int(n) for _, n in LINE.findall(reports[-1])], int(TOTAL.search(reports[-1]).group(1))
        if lines and sum(lines) == total:
            return _ledger(True, True, f"The total {total} matches the lines.", "Done.")
        return _ledger(
            False,
            False,
            f"The total {total} does not match the lines, which sum to {sum(lines)}.",
            "Total the report again, carefully.",
        )
    if "final answer" in last:
        return f"The audited total is {TOTAL.search(reports[-1]).group(1)}." if reports else "No total was produced."
    if "bullet-point plan" in last or "what went wrong" in last:
        return "- Ask the accountant to load, total and save the report.\n- Check the total against the lines."
    return "1. GIVEN OR VERIFIED FACTS\n- The expense report is loaded by the accountant's tool."


def _accountant(messages, weak: bool):
    tools = [_text(m) for m in messages if m.get("role") == "tool"]
    if not tools or messages[-1].get("role") != "tool":
        return {"tool_calls": [{"name": "load_expenses", "arguments": {}}]}
    report = next((t for t in reversed(tools) if LINE.search(t)), "")
    total = sum(int(n) for _, n in LINE.findall(report)) + (10 if weak else 0)  # the smaller model slips by 10
    if tools[-1] != "saved":
        return {"tool_calls": [{"name": "save_total", "arguments": {"total": str(total)}}]}
    return "\n".join(f"{item}: {n}" for item, n in LINE.findall(report)) + f"\nTOTAL: {total}"


def make_responder(seed):
    def respond(request):
        messages = request["messages"]
        system = _text(messages[0]) if messages and messages[0].get("role") == "system" else ""
        if system.startswith("You are the accountant"):
            return _accountant(messages, weak=request.get("model") == "audit-mini")
        return _manager(messages)

    return respond
