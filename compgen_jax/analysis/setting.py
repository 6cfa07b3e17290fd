"""A report's setting against the paper's: the config values of a sweep's programs that the same
sweep's `paper` preset (the authors' grid) never takes, so each report labels its deviations.

Values are compared per config key as sets over programs (and over the held-out fractions and
learning rates a program vmaps), so a width the paper also sweeps is no deviation and a smaller
world, a shorter schedule or fewer seeds is. Keys of a student or an encoding count only where
that student or encoding is used.
"""

import os
from collections.abc import Callable

from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import markdown as md
from compgen_jax.types import ConfigError

# The keys that define an experiment's setting (not its bookkeeping: logging, checkpoints,
# evaluation cadence, split retries).
KEYS = (
    "task.num_modules", "task.max_hotness", "held-out fraction", "task.support", "task.weights",
    "task.input_dim", "task.hidden_dim", "task.output_dim", "task.num_hidden_layers",
    "task.num_samples", "task.num_features", "task.num_objects", "task.horizon",
    "task.num_backups", "task.discount", "encoding.name", "encoding.inn_init_scale",
    "student.name", "student.mlp.width", "student.mlp.depth", "student.transformer.num_layers",
    "student.transformer.d_model", "student.transformer.num_heads",
    "student.transformer.ffw_dim", "student.hypernetwork.hidden", "optim.learning_rate",
    "optim.weight_decay", "optim.schedule", "train.num_steps", "train.batch_size", "num_seeds")
# key prefix -> (key, value) under which it applies
ONLY_WHERE = {"student.mlp.": ("student.name", "mlp"),
              "student.transformer.": ("student.name", "transformer"),
              "student.hypernetwork.": ("student.name", "hypernetwork"),
              "encoding.inn_": ("encoding.name", "invertible")}
# a key's vmapped values (a non-empty sweep.* tuple replaces the scalar)
VMAPPED = {"held-out fraction": ("sweep.frac_ood", "task.frac_ood"),
           "optim.learning_rate": ("sweep.learning_rate", "optim.learning_rate"),
           "optim.weight_decay": ("sweep.weight_decay", "optim.weight_decay")}


def values(configs: list[dict], key: str) -> set:
  """The values `key` takes over flattened configs (where it applies)."""
  out = set()
  for cfg in configs:
    where = next((w for prefix, w in ONLY_WHERE.items() if key.startswith(prefix)), None)
    if where and cfg.get(where[0]) != where[1]:
      continue
    vmapped, scalar = VMAPPED.get(key, (None, key))
    if vmapped and cfg.get(vmapped):
      out.update(cfg[vmapped])
    elif scalar in cfg:
      out.add(cfg[scalar])
  return out


def deviations(ours: list[dict], paper: list[dict]) -> list[tuple[str, set, set]]:
  """(key, our values, the paper's values) for every key with a value the paper never takes."""
  out = []
  for key in KEYS:
    mine, theirs = values(ours, key), values(paper, key)
    if mine - theirs:
      out.append((key, mine, theirs))
  return out


def _text(vals: set) -> str:
  def one(v):
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{v:g}" if (
        isinstance(v, float)) else str(v)
  return ", ".join(one(v) for v in sorted(vals, key=lambda v: (str(type(v)), v))) or "-"


def paper_spec(spec: str) -> str:
  """'configs/sweeps/x.py:cpu' -> 'configs/sweeps/x.py:paper'."""
  return spec.partition(":")[0] + ":paper"


def section(index: dict, sweep_dir: str, paper_programs: Callable | None) -> str:
  """The markdown: the deviations of the sweep's programs (their config.json) from the configs
  of its paper preset, as a table, or a line saying there are none. paper_programs(spec) gives
  the flattened configs of a sweep config spec's programs (sweeps.spec.paper_programs: this
  layer reads files only); None: not compared."""
  spec = paper_spec(index["spec"])
  if paper_programs is None:
    return ("Not compared: written without the sweep configs (`experiments/report.py` compares "
            f"with `{spec}`).")
  try:  # builds and validates the paper programs' configs; trains and writes nothing
    paper = paper_programs(spec)
  except ConfigError as e:
    return f"Not compared: the sweep's paper preset `{spec}` does not load ({e})."
  workdirs = [workdir_lib.located(sweep_dir, index, e["workdir"]) for e in index["programs"]]
  ours = [workdir_lib.flatten(workdir_lib.load_config(w)) for w in workdirs
          if os.path.exists(os.path.join(w, workdir_lib.CONFIG_FILE))]  # not yet started: none
  found = deviations(ours, paper)
  head = (f"Config values of this sweep's programs that its `paper` preset (`{spec}`, the "
          f"full-scale grid at the paper's setting) never takes; every other setting key "
          f"({len(KEYS)} compared: task, encoding, student, optimiser, steps, batch, seeds) "
          f"takes only values of the paper's grid.")
  if not found:
    return head + " None here."
  return "\n".join([head, "", md.table(["config", "here", "the paper's grid"],
                                       [[k, _text(a), _text(b)] for k, a, b in found])])
