"""Check that a commit of layout only changed no code: every Python file that differs from REV (default
HEAD) parses to the same syntax tree as it did at REV. Prints one line per file that differs and a count.

    .venv/bin/ruff format . && .venv/bin/python scripts/same_ast.py        # before committing the layout
    .venv/bin/python scripts/same_ast.py HEAD~1                             # after
"""

import ast
import subprocess
import sys


def changed_python_files(rev: str) -> list[str]:
    names = subprocess.run(
        ["git", "diff", "--name-only", "--diff-filter=M", rev, "--", "*.py"], capture_output=True, text=True, check=True
    )
    return [name for name in names.stdout.split() if name.endswith(".py")]


def tree_at(rev: str, path: str) -> str:
    source = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout
    return ast.dump(ast.parse(source, path))


def main(rev: str = "HEAD") -> int:
    files = changed_python_files(rev)
    differ = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            if ast.dump(ast.parse(f.read(), path)) != tree_at(rev, path):
                differ.append(path)
                print(f"{path}: its code changed, not only its layout")
    print(f"{len(files)} Python files changed since {rev}; {len(files) - len(differ)} with the same syntax tree")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
