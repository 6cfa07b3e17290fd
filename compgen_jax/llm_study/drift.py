"""How far each expert moved from the background, measured before anything is composed (issue
55): logit composition p_b * prod p_i / p_b is right where every other expert equals the
background, so an expert's drift off its skill is what the operator's assumption is about.

Per expert and seed, teacher-forced (jitted; both models on the same rows), on each set:
  prose, python   the background corpus's held-out documents of that source (lm_train's
                  llm_corpus.source_documents: the documents replay never trains on)
  <other skill>   another skill's prompts and answers (its held-out draw: no expert trains on
                  another skill's problems)
  <own skill>     the expert's own held-out problems, on the answers alone (what it trained on)
the mean per-token KL(p_expert || p_background), both cross-entropies and the perplexity
ratio exp(ce_expert - ce_background). An expert's off-skill KL is the mean over its off-skill
sets (each set weighs the same), its on-skill KL the own set's.

WORKDIR/drift/drift.jsonl  a row per (expert, seed, set)
WORKDIR/drift/report.md    the table; drift.png the figure (off-skill and on-skill KL per
                           expert and seed)
"""

import functools
import math
import os

import jax
import jax.numpy as jnp
import matplotlib
import ml_collections
import numpy as np

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402

from compgen_jax import files  # noqa: E402
from compgen_jax.analysis import figures, markdown  # noqa: E402
from compgen_jax.lm import gemma2, loading  # noqa: E402
from compgen_jax.lm.model import forward, loss_from_logits  # noqa: E402
from compgen_jax.lm_train import data, llm_corpus, recipes  # noqa: E402
from compgen_jax.types import DataError, PyTree  # noqa: E402

ROWS_FILE, REPORT_FILE, FIGURE_FILE = "drift.jsonl", "report.md", "drift.png"
BACKGROUND_SETS = ("prose", "python")
OWN, OFF = "own", "off"


def sets(cfg: ml_collections.ConfigDict, skills: tuple[str, ...]) -> dict[str, tuple]:
  """{set name: (kind, documents, loss masks)} of an expert's lm_train config `cfg`: the
  background sources' and the other skills' held-out documents (every token), its own corpus's
  held-out problems (answers only)."""
  out = {}
  for source in BACKGROUND_SETS + tuple(s for s in skills if s not in cfg.corpus.sources):
    _, (docs, masks) = llm_corpus.source_documents(cfg, source)
    out[source] = (OFF, docs, masks)
  _, (docs, masks) = llm_corpus.documents(cfg)
  out["+".join(cfg.corpus.sources)] = (OWN, docs, masks)
  return out


def rows_of(docs: list, masks: list, seq_len: int, max_rows: int) -> data.Packed:
  """The first `max_rows` packed rows of a set (the same rows for every model measured)."""
  packed = data.pack(docs, seq_len, masks)
  return data.Packed(*(a[:max_rows] for a in packed))


@functools.lru_cache(maxsize=8)
def _measure_fn(c: gemma2.Gemma2Config, batch: int):
  """jit: (expert params, background params, tokens [N, L], weight [N, L]) -> sums over the
  weighted targets of (KL(p_e || p_b), ce_e, ce_b) and their count, `batch` rows at a time."""
  model = gemma2.make_model(c)

  def one(pe, pb, tokens, weight):
    le, lb = (forward(model, p, tokens[:, :-1]) for p in (pe, pb))
    w = weight[:, 1:]
    count = w.sum()
    ce_e, _ = loss_from_logits(le, tokens[:, 1:], w)
    ce_b, _ = loss_from_logits(lb, tokens[:, 1:], w)
    return jnp.stack([recipes.mean_kl(le, lb, w) * count, ce_e * count, ce_b * count, count])

  def measure(pe, pb, tokens_NxL, weight_NxL):
    pad = -tokens_NxL.shape[0] % batch
    tokens = jnp.pad(tokens_NxL, ((0, pad), (0, 0))).reshape(-1, batch, tokens_NxL.shape[1])
    weight = jnp.pad(weight_NxL, ((0, pad), (0, 0))).reshape(tokens.shape)
    return jax.lax.map(lambda b: one(pe, pb, *b), (tokens, weight)).sum(0)

  return jax.jit(measure)


def measure(c: gemma2.Gemma2Config, expert: PyTree, background: PyTree, rows: data.Packed,
            batch: int) -> dict:
  """{kl, ce_expert, ce_background, ppl_ratio, tokens} of `expert` against `background`."""
  kl, ce_e, ce_b, count = np.asarray(_measure_fn(c, batch)(
      expert, background, jnp.asarray(rows.tokens_NxL), jnp.asarray(rows.weight_NxL)),
      np.float64)
  if count == 0:
    raise DataError("a drift set has no weighted target token")
  return dict(kl=kl / count, ce_expert=ce_e / count, ce_background=ce_b / count,
              ppl_ratio=math.exp((ce_e - ce_b) / count), tokens=int(count))


def run(experts: dict[str, ml_collections.ConfigDict], exports: dict[str, list[str]],
        background: str, out_dir: str, max_rows: int) -> list[dict]:
  """Measures every seed's export of every expert (`experts`: skill -> its lm_train config;
  `exports`: skill -> export directories by seed) against the `background` export; writes
  out_dir's rows, table and figure. Returns the rows."""
  _, pb = gemma2.load(background, dtype=jnp.float32)
  c = gemma2.config_from_hf(*loading.read_config(background))
  skills = tuple(experts)
  out = []
  for skill, cfg in experts.items():
    measured = {name: (kind, rows_of(docs, masks, cfg.corpus.seq_len, max_rows))
                for name, (kind, docs, masks) in sets(cfg, skills).items()}
    for seed, export in enumerate(exports[skill]):
      _, pe = gemma2.load(export, dtype=jnp.float32)
      for name, (kind, rows) in measured.items():
        out.append(dict(expert=skill, seed=seed, set=name, kind=kind,
                        **measure(c, pe, pb, rows, cfg.train.batch_size)))
  files.write_jsonl(os.path.join(out_dir, ROWS_FILE), out)
  write_report(out, out_dir)
  return out


def summary(rows: list[dict]) -> list[dict]:
  """Per (expert, seed): off_kl (the mean of its off-skill sets' KL, each set weighing the
  same), own_kl, and the off-skill perplexity ratio's geometric mean."""
  out = []
  for expert, seed in sorted({(r["expert"], r["seed"]) for r in rows}):
    mine = [r for r in rows if r["expert"] == expert and r["seed"] == seed]
    off = [r for r in mine if r["kind"] == OFF]
    own = [r for r in mine if r["kind"] == OWN]
    out.append(dict(expert=expert, seed=seed, off_kl=float(np.mean([r["kl"] for r in off])),
                    own_kl=float(np.mean([r["kl"] for r in own])),
                    off_ppl_ratio=float(np.exp(np.mean([np.log(r["ppl_ratio"]) for r in off])))))
  return out


def table(rows: list[dict]) -> str:
  """Experts x seeds by set: KL (nats per token) and the perplexity ratio."""
  names = list(dict.fromkeys(r["set"] for r in rows))
  by = {(r["expert"], r["seed"], r["set"]): r for r in rows}
  body = []
  for s in summary(rows):
    cells = []
    for name in names:
      r = by.get((s["expert"], s["seed"], name))
      cells.append("" if r is None else f"{r['kl']:.3f} ({r['ppl_ratio']:.2f}x)" + (
          " own" if r["kind"] == OWN else ""))
    body.append([s["expert"], s["seed"], *cells, f"{s['off_kl']:.3f}", f"{s['own_kl']:.3f}"])
  return markdown.table(["expert", "seed", *names, "off-skill KL", "own-skill KL"], body)


def write_report(rows: list[dict], out_dir: str) -> str:
  """out_dir's report.md (the table) and drift.png (off- and on-skill KL per expert and seed)."""
  s = summary(rows)
  fig, ax = plt.subplots(figsize=(5, 3.5))
  labels = [f"{r['expert']} s{r['seed']}" for r in s]
  x = np.arange(len(s))
  ax.bar(x - 0.2, [r["off_kl"] for r in s], 0.4, label="off its skill")
  ax.bar(x + 0.2, [r["own_kl"] for r in s], 0.4, label="on its skill")
  ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=7)
  ax.set_ylabel("KL(p_expert || p_background), nats/token")
  ax.legend(fontsize=7)
  ax.grid(alpha=0.3, axis="y")
  figures.save(fig, os.path.join(out_dir, FIGURE_FILE))
  text = "\n".join([
      "# Drift of each expert from the background (before composing)", "",
      "Mean per-token KL(p_expert || p_background) on each set, teacher-forced, and in brackets "
      "the perplexity ratio exp(ce_expert - ce_background); off-skill KL is the mean over the "
      "off-skill sets (prose, python, the other skills' problems), own-skill KL the expert's "
      "held-out problems' answers (llm_study/drift.py).", "", table(rows), "",
      markdown.figure(FIGURE_FILE, "off- and on-skill KL per expert and seed"), ""])
  return files.write_text(os.path.join(out_dir, REPORT_FILE), text)

