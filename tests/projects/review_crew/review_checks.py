"""The pass criterion: the right summary was published."""


def published(output, workdir):
    page = workdir / "published.txt"
    return page.is_file() and "1094" in page.read_text(), f"crew output: {output['raw'] or output['failed']}"
