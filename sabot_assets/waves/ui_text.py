"""Text sized for the Dagster UI, never cut silently: a shortened value says so and where the rest is."""

SUMMARY_CHARS = 6000  # a Markdown summary in the metadata panel; the full text is a linked file


def shortened(text: str | None, limit: int, where: str) -> str:
    """`text` cut to `limit` characters with a visible marker saying so and where the rest is."""
    text = text or ""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [shortened: {limit} of {len(text)} characters; all of it: {where}]"


def summary(markdown: str, where: str, limit: int = SUMMARY_CHARS) -> str:
    """The leading sections of a Markdown document that fit in `limit` characters, cut at a section
    (else a line) boundary, never inside a table row, with a marker naming what was left out."""
    if len(markdown) <= limit:
        return markdown
    cut = markdown.rfind("\n## ", 0, limit)
    if cut <= 0:
        cut = markdown.rfind("\n", 0, limit)
    cut = cut if cut > 0 else limit
    rest = markdown[cut:].count("\n## ")
    return (
        markdown[:cut].rstrip() + f"\n\n**[shortened for the UI: {cut} of {len(markdown)} characters shown, "
        f"{rest} more section(s); the full text: {where}]**\n"
    )
