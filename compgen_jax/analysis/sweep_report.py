"""A sweep's REPORT.md and figures, from DIR/index.json and its programs' workdirs alone.

The experiment is the sweep config's file stem (configs/sweeps/<experiment>.py); it picks the
sections. Every section states the paper's claim and the verdicts computed from this sweep's
runs; the last one lists each program's status, wall time and exact command lines.

The report is the same wherever the sweep dir now lies (a clone of results/ holding only the
programs' small files): workdirs are found relative to it, and paths are printed as recorded at
launch, relative to the repository the sweep ran from.
"""

import math
import os
import shlex
from typing import NamedTuple

from compgen_jax import files
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis import (
  fields,
  load,
  paper,
  registration,
  sections_data,
  sections_encodings,
  sections_fit,
  sections_law,
  sections_layers,
  sections_model,
  sections_steps,
  sections_students,
  setting,
)
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis import sections_support as support
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.types import ConfigError

REPORT_FILE = workdir_lib.SWEEP_REPORT_FILE
UNIT = (0.0, 1.0)  # an accuracy's bounds
# The labels, chance and bounds of the OOD metrics the families' losses write (R^2 for
# regression, accuracies for classification), in the order a report shows them; any other OOD
# key the rows carry is shown after them under its own name (metrics()).
METRICS = {m.key: m for m in (
    Metric("ood/r2", "OOD R^2", "ood_r2", "id/r2"),
    Metric("ood/acc_all", "OOD whole-trajectory accuracy", "ood_acc_all", "id/acc_all",
           bounds=UNIT),
    # Per-action chance: a uniform guess among the 5 actions.
    Metric("ood/acc", "OOD per-action accuracy", "ood_acc", "id/acc", 0.2, UNIT))}
# The objective training minimised, not a measure the paper judges (nor on one scale across
# families): no section of its own.
NOT_JUDGED = ("ood/loss",)
CLAIMS_FILE = workdir_lib.CLAIMS_FILE
SETTING_HEADING = "## Setting against the paper's"
CLAIMS_HEADING = "## Claims and their two readings"
RUNS_HEADING = "## Runs"  # the last section: wall times and command lines, which differ per run


class Experiment(NamedTuple):
  title: str
  sections: tuple  # (heading, fn(rows, metrics, out_dir) -> (markdown, claims))


DATA = ("Data scaling", sections_data.data_scaling)
DECODABILITY = ("Decodability vs compositional generalization", sections_model.decodability)
MODEL = ("Model size", sections_model.model_size)
SUPPORT = ("Task support", support.task_support)
LAYERS = ("Per-layer decodability of failing and succeeding identity-encoded runs",
          sections_layers.layers)
EXPERIMENTS = {
    "data_scaling": Experiment("Data scaling (hyperteacher)", (DATA, DECODABILITY, LAYERS)),
    "preference_data_scaling": Experiment("Data scaling (preference grid world)",
                                          (DATA, DECODABILITY)),
    "model_size": Experiment("Model size and task encodings (hyperteacher)", (
        MODEL, DECODABILITY, LAYERS)),
    "decodability_fit": Experiment("Decodability at fixed fit (hyperteacher)", (
        ("Decodability at fixed fit", sections_fit.decodability), LAYERS)),
    "encoding_table": Experiment("The paper's encoding table (hyperteacher)", (
        ("Task encodings: the paper's table", sections_encodings.encoding_table),)),
    "encoding_width": Experiment(
        "Width toward the table model: the invertible NN and few-shot encodings (hyperteacher)",
        (MODEL, DECODABILITY)),
    "preference_model_size": Experiment("Model size and task encodings (preference grid world)",
                                        (MODEL, DECODABILITY)),
    "width_depth_demo": Experiment("Width x depth (demo sweep)", (MODEL, DECODABILITY)),
    "scaling_law": Experiment("Scaling law (hyperteacher)", (
        ("Training tasks needed vs total tasks", sections_law.scaling_law),)),
    "transformer_vs_mlp": Experiment("Transformer vs MLP at matched parameter counts", (
        ("Transformer vs MLP", sections_students.transformer_vs_mlp),)),
    "encoding_nonlinearity": Experiment(
        "Encoding nonlinearity: the invertible NN's init scale (hyperteacher)",
        (("Encoding nonlinearity", sections_encodings.encoding_nonlinearity),)),
    "encoding_steps": Experiment("Training steps: the invertible-NN encoding (hyperteacher)", (
        ("Training steps", sections_steps.training_steps),)),
    "preference_steps": Experiment("Training steps (preference grid world)", (
        ("Training steps", sections_steps.training_steps),)),
    "task_support": Experiment("Task support (hyperteacher)", (SUPPORT,)),
    "preference_task_support": Experiment("Task support (preference grid world)", (SUPPORT,)),
}


def experiment_name(spec: str) -> str:
  """'configs/sweeps/data_scaling.py:cpu' -> 'data_scaling'."""
  return os.path.splitext(os.path.basename(spec.partition(":")[0]))[0]


def trained(entry: dict) -> bool:
  """The program's training finished (it is done, or failed in a later stage such as probe)."""
  return entry["status"] == "done" or (entry["status"] == "failed"
                                       and entry.get("stage") not in (None, "train"))


def read_sweep(sweep_dir: str) -> tuple[dict, list[dict]]:
  """(index, one row per run of every trained program, tagged `program`). Unfinished programs
  are left out: their last evaluation is of an earlier step than the others'."""
  sweep_dir = os.path.abspath(sweep_dir)
  index = workdir_lib.read_index(sweep_dir)
  if not index:
    raise ConfigError("sweep_dir", f"{sweep_dir!r} has no {workdir_lib.INDEX_FILE}: not a sweep "
                      f"dir (experiments/sweep.py writes it)")
  if index.get("app", "scaling") != "scaling":
    raise ConfigError("sweep_dir", f"{sweep_dir!r} is a sweep of {index['app']} programs, not "
                      "of the scaling experiment (experiments/report.py --dir writes its report)")
  rows = []
  for entry in filter(trained, index["programs"]):
    workdir = workdir_lib.located(sweep_dir, index, entry["workdir"])
    rows += [{**row, "program": entry["name"]} for row in load.read_workdir(workdir)]
  return index, rows


def metrics(rows: list[dict]) -> tuple[Metric, ...]:
  """Every OOD metric the rows carry (`ood/<name>`) but NOT_JUDGED: METRICS' first, in its
  order, then the others, sorted, each with its ID twin `id/<name>` where the rows carry one
  (OOD R^2 for rows without any)."""
  present = fields.present(rows)
  keys = fields.ordered([k for k in present if k.startswith("ood/")], METRICS, NOT_JUDGED)
  return tuple(METRICS.get(k) or _metric(k, present) for k in keys) or (METRICS["ood/r2"],)


def _metric(key: str, present: list[str]) -> Metric:
  """A metric no family has described yet: its own name, unbounded."""
  name = key.removeprefix("ood/")
  id_key = f"id/{name}" if f"id/{name}" in present else ""
  return Metric(key, f"OOD {name}", "ood_" + name.replace("/", "_"), id_key,
                bounds=(-math.inf, math.inf))


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def portable(text: str, repo: str = REPO) -> str:
  """A command line or path as a reader runs it: relative to the repository root `repo` (the one
  the sweep ran from), `python`."""
  words = [("python" if i == 0 and w.endswith(("python", "python3")) else w)
           for i, w in enumerate(shlex.split(text))] if " " in text else [text]
  return shlex.join(w.replace(repo + os.sep, "") for w in words) if " " in text else (
      text.replace(repo + os.sep, ""))


def launch_repo(index: dict, sweep_dir: str) -> str:
  """The repository root the sweep ran from: recorded in the index, or (an older index) the
  recorded sweep dir less the sweep dir's path inside this repository (a clone elsewhere)."""
  if index.get("repo"):
    return index["repo"]
  inside = os.path.relpath(os.path.abspath(sweep_dir), REPO)
  recorded = index.get("sweep_dir", "")
  if not inside.startswith(os.pardir) and recorded.endswith(os.sep + inside):
    return recorded[:-len(inside) - 1]
  return REPO


def recorded_path(index: dict, path: str) -> str:
  """A workdir or log as the index records it, made absolute as it was at launch."""
  return os.path.join(index["sweep_dir"], path)


def runs_section(index: dict, rows: list[dict], sweep_dir: str) -> str:
  """Status, runs and wall time per program, then the exact command lines."""
  repo = launch_repo(index, sweep_dir)
  runs = {}
  for row in rows:
    runs[row["program"]] = runs.get(row["program"], 0) + 1
  body, commands, total = [], [], 0.0
  for entry in index["programs"]:
    wall = entry.get("wall_s")
    total += wall or 0.0
    body.append([entry["name"], entry["status"] + (" (skipped: finished before)"
                                                   if entry.get("skipped") else ""),
                 runs.get(entry["name"], 0), "-" if wall is None else f"{wall:.1f}",
                 entry.get("error") or (f"exit {entry.get('exit_code')} in "
                                        f"{entry.get('stage')}; log "
                                        f"{portable(recorded_path(index, entry['log']), repo)}"
                                        if entry["status"] == "failed" else "")])
    commands.append(portable(entry["command"], repo))
    if os.path.exists(os.path.join(workdir_lib.located(sweep_dir, index, entry["workdir"]),
                                   workdir_lib.PROBE_FILE)):
      workdir = recorded_path(index, entry["workdir"])
      commands.append(portable(shlex.join(["python", os.path.join("experiments", "probe.py"),
                                           f"--workdir={workdir}"]), repo))
  failed = [e["name"] for e in index["programs"] if e["status"] != "done"]
  lines = [f"Sweep `{portable(index['spec'], repo)}` ({index['name']}), base `{index['base']}`, "
           f"launcher {index['launcher']}; {len(index['programs'])} programs, {len(rows)} runs, "
           f"total program wall time {total:.0f} s ({total / 60:.1f} min)"
           + _elapsed(index) + f"; index updated {index['updated']}.",
           "", md.check("every program finished", not failed,
                        "not finished: " + ", ".join(failed) + "; the sections above leave out "
                        "programs whose training did not finish" if failed else ""), "",
           md.table(["program", "status", "runs", "wall (s)", "error"], body), "",
           "Command lines (run from the repository root; probes where the workdir has them):",
           "", "```", *commands, "```"]
  return "\n".join(lines)


def _elapsed(index: dict) -> str:
  """The local launcher's elapsed time of the sweep's last invocation that ran programs."""
  if index.get("elapsed_s") is None:
    return ""
  at_once = index.get("parallel") or 1
  how = ("one at a time" if at_once == 1 else
         f"{at_once} at a time, each on its own share of the cores")
  return (f", elapsed {index['elapsed_s']:.0f} s ({index['elapsed_s'] / 60:.1f} min) in the last "
          f"invocation that ran programs ({how})")


def render(index: dict, rows: list[dict], out_dir: str, sweep_dir: str) -> str:
  """The report's markdown (figures and CLAIMS_FILE are written into out_dir as it goes)."""
  name = experiment_name(index["spec"])
  experiment = EXPERIMENTS.get(name, Experiment(f"Sweep {name}", ()))
  shown = metrics(rows)
  parts = [f"# {experiment.title}", "",
           f"Reproducing *{paper.TITLE}*. Every number below is computed from this sweep's "
           f"workdirs (final evaluation of each run; probes at the last probed step); means "
           f"± 1 s.d. over seeds. Verdicts compare seed means by 95% intervals and say "
           f"*not judged* where there are too few seeds; each section states its rules. "
           f"Claims: `{CLAIMS_FILE}`. Written by `python experiments/report.py "
           f"--sweep_dir={portable(index['sweep_dir'], launch_repo(index, sweep_dir))}`.", "",
           registration.sentence(index.get("started")), ""]
  claims = []
  if not rows:
    parts.append("No finished runs yet.")
  else:
    parts += [SETTING_HEADING, "", setting.section(index, sweep_dir), ""]
    for heading, section in experiment.sections:
      text, found = section(rows, shown, out_dir)
      claims += [claims_table.registered(c, name, index.get("started")) for c in found]
      if text:
        parts += [f"## {heading}", "", text, ""]
  if claims:  # each verdict with its two readings, as the claims table shows them
    parts += [CLAIMS_HEADING, "", md.table(
        ["claim", "verdict", "composition (OOD against ID)", "against the paper's value",
         "rule registered"],
        [[md.text_cell(c["claim"]), f"**{c['verdict']}**", md.text_cell(c["composition"]),
          md.text_cell(c["against_paper"]), f"{c['registration']} ({c['rule_commit']})"]
         for c in claims]), ""]
  parts += [RUNS_HEADING, "", runs_section(index, rows, sweep_dir), ""]
  write_claims(out_dir, claims)
  return "\n".join(parts)


def write_claims(out_dir: str, claims: list[dict]) -> str:
  """CLAIMS_FILE: the sections' claims as a JSON list, sorted keys, byte-stable."""
  return files.write_text(os.path.join(out_dir, CLAIMS_FILE), claims_table.claims_json(claims))


def write_report(sweep_dir: str, out_dir: str | None = None) -> str:
  """Writes REPORT.md (and its PNGs) into out_dir (default: the sweep dir); returns its path.
  The setting section compares with the paper preset's programs the launch wrote into the sweep
  dir (workdir.PAPER_PROGRAMS_FILE)."""
  index, rows = read_sweep(sweep_dir)
  out_dir = out_dir or sweep_dir
  os.makedirs(out_dir, exist_ok=True)
  text = render(index, rows, out_dir, os.path.abspath(sweep_dir))
  return files.write_text(os.path.join(out_dir, REPORT_FILE), text)
