"""The product's sizes against the project's limits: files of at most 600 lines, functions of
at most 80.

    python -P scripts/dev/sizes.py [--root DIR] [--allow FILE]

Product files are the C++ and Python files under src/ and ortops/ that git tracks (or would:
untracked files not ignored count too), src/tools/ excepted (the build's table generator, not
shipped). A Python function is its ``def`` line to its last line (``ast``: end_lineno - lineno
+ 1; a nested function counts inside its enclosing one and on its own). A C++ function is a
body at namespace or class scope, from the first line of its declaration to its closing brace,
found by matching braces after comments, strings and preprocessor lines are blanked; lambdas
and local classes inside count as part of their function.

It prints one line per violation (``path:line: what N lines (limit L)``) and exits with status
1 when there is any; ``--allow FILE`` names violations to report but not fail on (one
``path`` or ``path::function`` a line, ``#`` comments), for the ones other branches are
removing (tests/size_allowlist.txt).
"""

from __future__ import annotations

import argparse
import ast
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

FILE_LIMIT = 600
FUNCTION_LIMIT = 80
ROOTS = ("src", "ortops")
EXCLUDED = ("src/tools/",)
CPP_SUFFIXES = (".cpp", ".hpp", ".h", ".cc", ".cxx", ".hh")


@dataclass(frozen=True)
class Violation:
    path: str       # relative to the root, with "/"
    line: int
    name: str       # the function, "" for the file itself
    lines: int
    limit: int

    @property
    def key(self) -> str:
        """How the allow-list names it: ``path`` or ``path::function``."""
        return f"{self.path}::{self.name}" if self.name else self.path

    def __str__(self) -> str:
        what = f"function {self.name}" if self.name else "file"
        return f"{self.path}:{self.line}: {what} {self.lines} lines (limit {self.limit})"


def product_files(root: pathlib.Path) -> list[str]:
    """Relative paths of the product's C++ and Python files (see the module's docstring)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                              "--", *ROOTS], cwd=root, capture_output=True, text=True, check=True)
        paths = out.stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file there
        paths = [str(p.relative_to(root)).replace(os.sep, "/")
                 for r in ROOTS for p in (root / r).rglob("*") if p.is_file()]
    return sorted(p for p in set(paths)
                  if p.endswith((".py",) + CPP_SUFFIXES) and not p.startswith(EXCLUDED)
                  and (root / p).is_file())


# -- Python ----------------------------------------------------------------------------------
def python_functions(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function and method of ``source``."""
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((name, child.lineno, child.end_lineno - child.lineno + 1))
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


# -- C++ -------------------------------------------------------------------------------------
_RAW = re.compile(r'R"([^()\\\s]{0,16})\(')


def blank_cpp(text: str) -> str:
    """``text`` with comments, string and character literals and preprocessor lines blanked
    (newlines kept, so that line numbers stay; a literal keeps its quotes)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
            continue
        raw = _RAW.match(text, i)
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = text.find(")" + raw.group(1) + '"', raw.end())
            end = n if close < 0 else close + len(raw.group(1)) + 2
            out.append('""' + "".join(ch if ch == "\n" else " " for ch in text[i + 2:end]))
            i = end
            continue
        if c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isdigit()):  # 1'000: a separator
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j, n)
            closed = j < n and text[j] == c
            out.append(c + "".join(ch if ch == "\n" else " " for ch in text[i + 1:j]) + (c if closed else ""))
            i = j + 1 if closed else j
            continue
        out.append(c)
        i += 1
    return _blank_preprocessor("".join(out))


def _blank_preprocessor(code: str) -> str:
    lines = code.split("\n")
    continued = False
    for k, line in enumerate(lines):
        if continued or line.lstrip().startswith("#"):
            continued = line.rstrip().endswith("\\")
            lines[k] = ""
    return "\n".join(lines)


_SCOPE = re.compile(r"^(?:template\s*<.*>\s*)?(?:\[\[.*\]\]\s*)?(class|struct|union|enum|namespace)\b"
                    r"|^extern\s*\"\s*\"$")


def cpp_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function body at namespace or class scope."""
    code = blank_cpp(text)
    line_of = _line_index(code)
    out = []
    _scan_scope(code, 0, len(code), line_of, out)
    return out


def _line_index(code: str):
    starts = [0] + [m.end() for m in re.finditer("\n", code)]

    def line_of(pos: int) -> int:
        lo, hi = 0, len(starts)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if starts[mid] <= pos:
                lo = mid
            else:
                hi = mid
        return lo + 1
    return line_of


def _match(code: str, open_pos: int) -> int:
    """Position of the brace closing the one at ``open_pos`` (len(code) if none)."""
    depth = 0
    for i in range(open_pos, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(code)


def _scan_scope(code: str, begin: int, end: int, line_of, out: list) -> None:
    """Find the function bodies among the braces of a namespace or class body."""
    head = begin          # where the current declaration started
    i = begin
    while i < end:
        c = code[i]
        if c in ";}":
            head = i + 1
        elif c == "{":
            header = " ".join(code[head:i].split())
            close = _match(code, i)
            if _SCOPE.match(header):
                _scan_scope(code, i + 1, close, line_of, out)
                head = i = close + 1
                continue
            if "(" in header and not header.endswith("="):
                # A constructor's member initializer braces (x_{a}, y_{b} {): the body is the
                # last brace group of the declaration.
                nxt = re.compile(r"\s*(\S)").match(code, close + 1)
                if nxt and nxt.group(1) in ",{":
                    i = close + 1
                    continue
                start = head + len(code[head:i]) - len(code[head:i].lstrip())
                out.append((_name(header), line_of(start), line_of(close) - line_of(start) + 1))
            head = i = close + 1
            continue
        i += 1


def _name(header: str) -> str:
    """The function's name in its declaration (the identifier before its parameter list)."""
    depth, cut = 0, None
    for j, ch in enumerate(header):  # the first '(' outside template arguments... of the name
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            cut = j
            break
    before = header[:cut] if cut is not None else header
    m = re.search(r"((?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*(?:\s*(?:\(\)|[^\w\s(]+))?)\s*$", before)
    return m.group(1).replace(" ", "") if m else header[:40]


# -- the check -------------------------------------------------------------------------------
def violations(root: pathlib.Path) -> list[Violation]:
    found = []
    for rel in product_files(root):
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if n > FILE_LIMIT:
            found.append(Violation(rel, 1, "", n, FILE_LIMIT))
        funcs = python_functions(text) if rel.endswith(".py") else cpp_functions(text)
        found += [Violation(rel, line, name, lines, FUNCTION_LIMIT)
                  for name, line, lines in funcs if lines > FUNCTION_LIMIT]
    return found


def read_allowlist(path: str | os.PathLike[str] | None) -> set[str]:
    if path is None:
        return set()
    lines = pathlib.Path(path).read_text().splitlines()
    return {s for s in (line.split("#", 1)[0].strip() for line in lines) if s}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[2]))
    parser.add_argument("--allow", default=None, help="allow-list file (path or path::function a line)")
    args = parser.parse_args(argv)
    allowed = read_allowlist(args.allow)
    failing = 0
    for v in violations(pathlib.Path(args.root)):
        tag = " (allowed)" if v.key in allowed else ""
        failing += not tag
        print(f"{v}{tag}")
    print(f"{failing} violation(s) not allowed" if failing else "sizes: within the limits"
          + (" (allowed ones aside)" if allowed else ""))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
