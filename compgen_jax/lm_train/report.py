"""report.md of an lm_train workdir, from its config.json and metrics.jsonl alone: what was
trained on (and from), each run's loss curve (train loss at every logged step, held-out loss
where it was measured) and the final train / held-out loss; curves.png beside it."""

import math
import os

from compgen_jax import files, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import curves
from compgen_jax.analysis import report as table_lib
from compgen_jax.types import DataError

TRAIN, HELD_OUT, HELD_OUT_ACC = "train/loss", "eval/loss", "eval/token_acc"
COPY_SECOND, COPY_FIRST = "eval/copy_second", "eval/copy_first"  # evals.copying


def _loss(row: dict, key: str) -> float:
  return float(row.get(key, math.nan))


def render(cfg: dict, rows: list[dict]) -> str:
  """The report's text (a pure function of the config and the metric rows)."""
  c = cfg["corpus"]
  what = (f"llm_data sources {', '.join(c['sources'])} of {c['data_dir']}"
          + (" (loss on the answers only)" if c["answer_only"] else "")
          if c["source"] == "llm_data" else f"the {c['source']} corpus")
  lines = ["# lm_train", "", f"Trained on {what}; "
           + (f"fine-tuned from {cfg['init_from']}." if cfg["init_from"] else "from scratch.")]
  m, t, e = cfg["model"], cfg["train"], cfg["evals"]
  runs = sorted({r["run"] for r in rows})
  last = {run: [r for r in rows if r["run"] == run][-1] for run in runs}
  steps = max(r["step"] for r in last.values())
  if steps < t["num_steps"] and e.get("stop_copying"):
    steps = (f"{steps} steps (stopped early: second-copy accuracy reached evals.stop_copying "
             f"{e['stop_copying']}; at most {t['num_steps']})")
  else:
    steps = f"{t['num_steps']} steps"
  lines += [f"Model: width {m['width']}, {m['num_layers']} layers, vocabulary "
            f"{m['vocab_size']}; {steps} of {t['batch_size']} x {c['seq_len']} tokens, "
            f"{cfg['num_seeds']} seed(s).", "", "## Final loss (nats per target token)", ""]
  copy = bool(e.get("copying"))  # in-context copying of held-out repeat lines, when measured
  lines += ["```", table_lib.table(
      ["run", "seed", "step", "train loss", "held-out loss", "held-out token accuracy"]
      + (["copying: second copy", "first copy"] if copy else []),
      [[run, last[run]["seed"], last[run]["step"], _loss(last[run], TRAIN),
        _loss(last[run], HELD_OUT), _loss(last[run], HELD_OUT_ACC)]
       + ([_loss(last[run], COPY_SECOND), _loss(last[run], COPY_FIRST)] if copy else [])
       for run in runs]), "```", ""]
  for run in runs:
    mine = [r for r in rows if r["run"] == run]
    lines += [f"## Loss curve, run {run} (seed {mine[0]['seed']}; held-out loss where "
              "measured)", "", "```",
              table_lib.table(["step", "train loss", "held-out loss"]
                              + (["second copy"] if copy else []),
                              [[r["step"], _loss(r, TRAIN), r.get(HELD_OUT, "")]
                               + ([r.get(COPY_SECOND, "")] if copy else []) for r in mine]),
              "```", ""]
  return "\n".join(lines)


def write(directory: str, out_dir: str | None = None) -> str:
  """Writes report.md and curves.png of `directory` into out_dir (default: the workdir)."""
  out_dir = out_dir or directory
  rows = metric_writer.read_rows(os.path.join(directory, workdir_lib.METRICS_FILE))
  if not rows:
    raise DataError(f"{directory!r} has no {workdir_lib.METRICS_FILE} rows: nothing trained")
  os.makedirs(out_dir, exist_ok=True)
  cfg = workdir_lib.config_dict(workdir_lib.load_config(directory))
  curves.plot_curves(directory, os.path.join(os.path.abspath(out_dir), workdir_lib.CURVES_FILE))
  return files.write_text(os.path.join(out_dir, workdir_lib.REPORT_FILE), render(cfg, rows))
