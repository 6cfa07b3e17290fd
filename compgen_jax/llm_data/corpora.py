"""The two real corpora, read from the installed interpreter (nothing is fetched, and every
machine that runs the project has them: CI installs nothing beyond pyproject.toml).

Prose: the Python documentation's topic texts shipped with the standard library
(pydoc_data.topics: 79 sections of the language reference, 464,970 characters on CPython 3.11.7)
and the module docstrings of the standard library (565 modules, 245,886 characters). Chosen over
a Debian package or a book because the interpreter brings them wherever the code runs, they are
English written by people, and their subject (Python) is the one the code corpus and the skills
share, as in a code model's pre-training mix.

Code: every top-level function and method of the standard library's .py files (test suites and
site-packages left out) that has a docstring and a body, as a docstring -> body pair shaped like
HumanEval: `prompt` (decorators, signature, docstring) and `body` (the rest), dedented. 6,602
functions, 4.40 M characters on 3.11.7. Files are read in sorted path order and functions in
source order; a file that does not parse is skipped. Another interpreter version gives another
(equally deterministic) corpus.
"""

import ast
import os
import pydoc_data.topics
import sysconfig
import textwrap
import warnings

SKIPPED_DIRS = ("site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__")


def stdlib_root() -> str:
  return sysconfig.get_paths()["stdlib"]


def stdlib_files(root: str) -> list[str]:
  """The .py files under `root` (paths relative to it), sorted, test suites left out."""
  out = []
  for folder, dirs, names in os.walk(root):
    dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
    rel = os.path.relpath(folder, root)
    out.extend(os.path.normpath(os.path.join(rel, n)) for n in names if n.endswith(".py"))
  return sorted(out)


def _parse(path: str) -> tuple[str, ast.Module] | None:
  try:
    with open(path, encoding="utf-8") as f:
      source = f.read()
    with warnings.catch_warnings():  # invalid escapes in old modules
      warnings.simplefilter("ignore")
      return source, ast.parse(source)
  except (SyntaxError, ValueError, UnicodeDecodeError):
    return None


def _functions(tree: ast.Module):
  """Top-level functions and the methods of top-level classes, in source order."""
  for node in tree.body:
    if isinstance(node, ast.ClassDef):
      yield from (n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
      yield node


def _pair(lines: list[str], node) -> tuple[str, str] | None:
  """(prompt, body) of a function with a docstring and at least one statement after it."""
  if ast.get_docstring(node) is None or len(node.body) < 2:
    return None
  start = min([node.lineno] + [d.lineno for d in node.decorator_list])
  split = node.body[0].end_lineno
  text = textwrap.dedent("".join(lines[start - 1:node.end_lineno]))
  kept = text.splitlines(keepends=True)
  prompt, body = "".join(kept[:split - start + 1]), "".join(kept[split - start + 1:])
  return (prompt, body) if body.strip() else None  # e.g. `def f(): "doc"; return 1`


def python_corpus(root: str | None = None, max_functions: int = 0) -> tuple[list, list]:
  """(function records {path, name, prompt, body}, module docstring records {source, text})
  from the standard library at `root` (the running interpreter's by default)."""
  root = root or stdlib_root()
  functions, modules = [], []
  for rel in stdlib_files(root):
    if max_functions and len(functions) >= max_functions:
      break
    parsed = _parse(os.path.join(root, rel))
    if parsed is None:
      continue
    source, tree = parsed
    doc = ast.get_docstring(tree)
    if doc:
      modules.append(dict(source=f"module:{rel}", text=doc))
    lines = source.splitlines(keepends=True)
    for node in _functions(tree):
      pair = _pair(lines, node)
      if pair is not None:
        functions.append(dict(path=rel, name=node.name, prompt=pair[0], body=pair[1]))
  return functions[:max_functions] if max_functions else functions, modules


def prose_corpus(module_docs: list[dict]) -> list[dict]:
  """{source, text} records: the pydoc topics (sorted by name), then the module docstrings."""
  topics = pydoc_data.topics.topics
  return [dict(source=f"topic:{name}", text=topics[name]) for name in sorted(topics)] + list(
      module_docs)
