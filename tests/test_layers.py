"""The package's import graph points down only (docs/architecture.md, "Layers"): every import
of a compgen_jax module, read from the source (including imports inside functions), goes to a
lower layer; analysis reads workdir files and imports only the file and task layers; the
applications never import each other; the sweep launcher sits above the applications whose
programs it validates and launches."""

import ast
import os

from tests.helpers import REPO

# Bottom to top. A unit is a subpackage or a top-level module of compgen_jax.
LAYERS = (
    ("types", "rng", "files"),
    ("workdir", "checkpointing", "checks"),
    ("metric_writer", "cli"),
    ("training",),  # the engine: family-free (it imports no task, student or application)
    ("tasks", "encodings", "lm"),
    ("students", "composition"),
    ("analysis",),
    ("scaling",),  # paper 1's experiment (hyperteacher, preference); theory builds on it
    ("llm_data",),  # the LLM study's corpora, skills and tokenizer, for training and llm_eval
    ("theory", "letters", "llm_eval", "images", "lm_train"),  # applications
    ("llm_study",),  # the LLM study's pipeline: llm_data -> lm_train -> llm_eval, as stages
    ("apps",),  # one record per application: what the binaries and the sweep launcher read
    ("sweeps",),  # launches train.py / evaluate.py / probe.py programs (apps.App.sweep)
)
APPLICATIONS = set(LAYERS[-4])
# A read-only leaf: tables, plots and reports from workdir files, never a model or a run.
ANALYSIS_MAY_IMPORT = {"types", "files", "workdir", "metric_writer", "tasks"}
# Families that train through the engine alone (the contract: init_one + step + a config).
ENGINE_ONLY = ("images", "letters", "lm_train")
PACKAGE = os.path.join(REPO, "compgen_jax")


def _unit(module: str) -> str:
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else ""  # "" is the package itself (its __init__)


def _imports(path: str, module: str) -> set[str]:
  """The compgen_jax modules `path` imports (`from compgen_jax import x` counts as x)."""
  out = set()
  for node in ast.walk(ast.parse(open(path).read(), path)):
    if isinstance(node, ast.Import):
      out |= {a.name for a in node.names if a.name.split(".")[0] == "compgen_jax"}
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      if node.module == "compgen_jax":
        out |= {f"compgen_jax.{a.name}" for a in node.names}
      elif node.module.startswith("compgen_jax."):
        out.add(node.module)
    elif isinstance(node, ast.ImportFrom) and node.level:
      raise AssertionError(f"{module}: relative import (the package uses absolute ones)")
  return out


def _graph() -> dict[str, set[str]]:
  """unit -> the other units it imports."""
  graph: dict[str, set[str]] = {}
  for root, _, names in os.walk(PACKAGE):
    for name in names:
      if name.endswith(".py"):
        path = os.path.join(root, name)
        rel = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
        module = rel.removesuffix(".__init__")
        unit = _unit(module)
        graph.setdefault(unit, set()).update(
            u for u in map(_unit, _imports(path, module)) if u not in (unit, ""))
  return graph


def test_every_unit_has_a_layer():
  layered = {u for layer in LAYERS for u in layer}
  assert set(_graph()) - {""} == layered  # a new subpackage or module gets a layer here


def test_imports_point_down():
  level = {u: i for i, layer in enumerate(LAYERS) for u in layer}
  bad = sorted(f"{unit} (layer {level[unit]}) imports {dep} (layer {level[dep]})"
               for unit, deps in _graph().items() if unit for dep in deps
               if level[dep] >= level[unit])
  assert not bad, "\n".join(bad)


def test_analysis_reads_files_only_and_applications_are_independent():
  graph = _graph()
  assert graph["analysis"] <= ANALYSIS_MAY_IMPORT, graph["analysis"] - ANALYSIS_MAY_IMPORT
  for app in APPLICATIONS:
    assert not graph[app] & (APPLICATIONS - {app}), (app, graph[app] & APPLICATIONS)
  for app in ENGINE_ONLY:  # their training is the engine's, not the scaling experiment's
    assert "scaling" not in graph[app], app


def test_the_check_sees_an_upward_import(tmp_path):
  # The parser finds imports inside functions and `from compgen_jax import x` forms.
  path = tmp_path / "m.py"
  path.write_text("def f():\n  from compgen_jax import passes\n  import compgen_jax.sweeps.index\n"
                  "from compgen_jax.training import loop\n")
  assert {_unit(m) for m in _imports(str(path), "compgen_jax.analysis.m")} == {
      "passes", "sweeps", "training"}
