"""A report's setting against the paper's: the config values of a sweep's programs that the same
sweep's `paper` preset (the authors' grid) never takes, so each report labels its deviations.

Every key of the flattened configs is compared (a new family's, student's or encoding's field
too) but the bookkeeping ones (BOOKKEEPING). Values are compared per key as sets over programs
(and over the held-out fractions and learning rates a program vmaps), so a width the paper also
sweeps is no deviation and a smaller world, a shorter schedule or fewer seeds is. A key counts
only where it is read: a student's subsection only where that student trains, and the keys of
WHERE only under their choice.
"""

import json
import os

from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import markdown as md

# Keys (or key prefixes, ending in '.') that are bookkeeping, not the setting: how a run logs,
# checkpoints and shows progress, its evaluation and probe passes (measurements of the run, not
# how it trains), how often a split is redrawn, and the base seed (the seeds compare as
# num_seeds), and the application's name (`app`: which code runs it, not its setting). Every
# other key is compared.
BOOKKEEPING = ("app", "seed", "evals.", "probe.", "task.max_retries", "train.checkpoint_every",
               "train.chunk_size", "train.log_every", "train.max_checkpoints", "train.progress",
               "train.writers")
BOOKKEEPING_TEXT = "logging, checkpoints, evaluation and probe passes, split retries, base seed"
# The vmapped axes: a non-empty sweep.<name> tuple replaces the scalar key ending in .<name>
# (task.frac_ood, optim.learning_rate, optim.weight_decay: scaling/runs.py's HPARAM_FIELDS).
SWEEP = "sweep."
# Flat keys read under one choice only (key prefix -> (key, value)); a subsection
# <section>.<name>. applies where <section>.name is <name> without being listed. A key named
# nowhere here is compared wherever it is set: an extra row at worst, never a dropped one.
WHERE = {"encoding.inn_": ("encoding.name", "invertible"),
         "encoding.language_": ("encoding.name", "language"),
         "encoding.num_shots": ("encoding.name", "few_shot"),
         "encoding.num_bins": ("encoding.name", "interval_shuffle"),
         "encoding.keep_zeros": ("encoding.name", "interval_shuffle"),
         "optim.warmup_steps": ("optim.schedule", "warmup_cosine"),
         "optim.end_factor": ("optim.schedule", "warmup_cosine")}
# Row order: the data flow (task -> encoding -> student -> optimiser -> training), any other
# section next, top-level keys (num_seeds) last; alphabetical within each.
SECTIONS = ("task", "encoding", "student", "optim", "train")
LABELS = {"task.frac_ood": "held-out fraction"}  # the paper's word for the split fraction


def _applies(cfg: dict, key: str) -> bool:
  where = next((w for prefix, w in WHERE.items() if key.startswith(prefix)), None)
  section, _, rest = key.partition(".")
  if where is None and "." in rest and f"{section}.name" in cfg:
    where = (f"{section}.name", rest.partition(".")[0])
  return where is None or cfg.get(where[0]) == where[1]


def values(configs: list[dict], key: str) -> set:
  """The values `key` (or its label) takes over flattened configs (where it applies)."""
  key = next((k for k, label in LABELS.items() if label == key), key)
  out = set()
  for cfg in configs:
    if not _applies(cfg, key):
      continue
    vmapped = SWEEP + key.rpartition(".")[2]
    if vmapped != key and cfg.get(vmapped):
      out.update(cfg[vmapped])
    elif key in cfg:
      out.add(cfg[key])
  return out


def setting_keys(configs: list[dict]) -> list[str]:
  """Every key of the configs but bookkeeping and the sweep section (folded into the keys it
  vmaps), in row order."""
  keys = {k for cfg in configs for k in cfg if not k.startswith(SWEEP)
          and not any(k == b or (b.endswith(".") and k.startswith(b)) for b in BOOKKEEPING)}

  def order(key):
    section = key.partition(".")[0] if "." in key else None
    rank = (SECTIONS.index(section) if section in SECTIONS else
            len(SECTIONS) if section else len(SECTIONS) + 1)
    return rank, key
  return sorted(keys, key=order)


def compared(ours: list[dict], paper: list[dict]) -> list[tuple[str, set, set]]:
  """(key, our values, the paper's values) for every setting key both sides read. A key the
  paper's grid never reads (a field of a choice it does not make, such as a warmup under its
  constant schedule) is not compared: the choice's own key shows that deviation."""
  both = [(key, values(ours, key), values(paper, key)) for key in setting_keys(ours + paper)]
  return [(LABELS.get(key, key), mine, theirs) for key, mine, theirs in both if mine and theirs]


def deviations(ours: list[dict], paper: list[dict]) -> list[tuple[str, set, set]]:
  """(key, our values, the paper's values) for every key with a value the paper never takes."""
  return [(key, mine, theirs) for key, mine, theirs in compared(ours, paper) if mine - theirs]


def _text(vals: set) -> str:
  def one(v):
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{v:g}" if (
        isinstance(v, float)) else str(v)
  return ", ".join(one(v) for v in sorted(vals, key=lambda v: (str(type(v)), v))) or "-"


def paper_spec(spec: str) -> str:
  """'configs/sweeps/x.py:cpu' -> 'configs/sweeps/x.py:paper'."""
  return spec.partition(":")[0] + ":paper"


def section(index: dict, sweep_dir: str) -> str:
  """The markdown: the deviations of the sweep's programs (their config.json) from the configs
  of its paper preset (the sweep dir's PAPER_PROGRAMS_FILE, written at launch), as a table, or a
  line saying there are none."""
  spec = paper_spec(index["spec"])
  path = os.path.join(sweep_dir, workdir_lib.PAPER_PROGRAMS_FILE)
  if not os.path.exists(path):
    return (f"Not compared: no `{workdir_lib.PAPER_PROGRAMS_FILE}` (the sweep launcher writes "
            f"it: the programs of `{spec}`).")
  with open(path) as f:
    saved = json.load(f)
  if "error" in saved:
    return f"Not compared: the sweep's paper preset `{spec}` does not load ({saved['error']})."
  paper = [workdir_lib.flatten(c) for c in saved["programs"]]
  workdirs = [workdir_lib.located(sweep_dir, index, e["workdir"]) for e in index["programs"]]
  ours = [workdir_lib.flatten(workdir_lib.load_config(w)) for w in workdirs
          if os.path.exists(os.path.join(w, workdir_lib.CONFIG_FILE))]  # not yet started: none
  found = deviations(ours, paper)
  head = (f"Config values of this sweep's programs that its `paper` preset (`{spec}`, the "
          f"full-scale grid at the paper's setting) never takes; every other setting key "
          f"({len(compared(ours, paper))} compared: every config key but bookkeeping, i.e. "
          f"{BOOKKEEPING_TEXT}) takes only values of the paper's grid.")
  if not found:
    return head + " None here."
  return "\n".join([head, "", md.table(["config", "here", "the paper's grid"],
                                       [[k, _text(a), _text(b)] for k, a, b in found])])
