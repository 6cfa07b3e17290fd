"""What gets scored: single models, compositions and merges of local Gemma-2 checkpoints, and
the trivial baselines (llm_eval/baselines.py: no model).

Checkpoints are converted once into WORKDIR/converted/<name>-<fingerprint> (orbax), keyed by a
fingerprint of config.json and the shards' names and sizes, so a changed checkpoint is converted
again rather than read stale. Models with the same architecture share one `Model` object, so
every system of that architecture reuses one compiled decoding program.
"""

import functools
import hashlib
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax import checks
from compgen_jax.composition import arithmetic, spec
from compgen_jax.composition.compose import OPERATORS
from compgen_jax.llm_eval import baselines
from compgen_jax.lm import gemma2, loading
from compgen_jax.lm.model import Model, same_vocabulary
from compgen_jax.types import CheckpointError, ConfigError, PyTree

MERGES = ("task_arithmetic", "weight_average")


PROMPT = "{prompt}"  # a template's stand-in for the benchmark's prompt


class System(NamedTuple):
  name: str
  kind: str                   # "single", "composed", a merge in MERGES or "baseline"
  members: tuple[str, ...]    # model names: [model], [background, *experts], merged models; ()
  templates: tuple[str, ...] = ()  # per member (composed): its prompt template; () = PROMPT
  weights: tuple[float, ...] = ()    # per expert (composed): lambda_i; () = the operator's
  # the step spec it decodes with (composed): `compose` with the composition's own overrides
  compose: ml_collections.FrozenConfigDict | None = None


def apply_template(template: str, prompt: str) -> str:
  """The member's prompt (a plain replace: prompts hold braces, code does)."""
  return template.replace(PROMPT, prompt)


def _components(cfg, names) -> dict[str, tuple[str, str, float]]:
  """Composition member name -> (model, template, weight): every model under PROMPT at weight
  1, and cfg.components; ConfigError naming the field for a bad one."""
  out = {n: (n, PROMPT, 1.0) for n in names}
  for name, c in cfg.components.items():
    if name in out:
      raise ConfigError(f"components.{name}", "is also a model's name: give it another")
    checks.choice(f"components.{name}.model", c.model, names)
    if not isinstance(c.template, str):
      raise ConfigError(f"components.{name}.template", f"must be a string, got {c.template!r}")
    checks.number(f"components.{name}.weight", c.weight)
    out[name] = (c.model, c.template, float(c.weight))
  return out


def _weights(compose, system: str, experts: list[str], components, lam_field: str
             ) -> tuple[float, ...]:
  """The experts' weights: `compose.lam` when given, else each member's (a model's is 1); an
  operator without weights (the authors') takes none. `lam_field` names where compose.lam was
  set."""
  step = spec.from_config(compose)
  spec.check_weights(step, compose.lam, len(experts), lam_field)
  if compose.lam:
    return tuple(float(w) for w in compose.lam)
  weights = tuple(components[e][2] for e in experts)
  if not OPERATORS[step.operator].weighted:
    odd = [e for e, w in zip(experts, weights, strict=True) if w != 1.0]
    if odd:
      raise ConfigError(f"components.{odd[0]}.weight", f"composition {system!r} uses the "
                        f"{step.operator!r} operator, whose weights are all 1 "
                        "(compose.operator=paper takes weights)")
    return ()
  return weights


COMPOSITION_FIELDS = ("experts", "compose")  # of a composition given as a section


def composition(cfg, name: str) -> tuple[tuple, ml_collections.FrozenConfigDict, str]:
  """(experts, step spec, the field compose.lam comes from) of `compositions.<name>`: a tuple
  of members under the global `compose`, or a section {experts, compose} whose `compose`
  overrides the global fields it names (the same experts under another mask or gate, scored
  side by side); ConfigError naming the field for a bad one."""
  entry, field = cfg.compositions[name], f"compositions.{name}"
  if not isinstance(entry, ml_collections.ConfigDict):
    return entry, ml_collections.FrozenConfigDict(cfg.compose), "compose.lam"
  for key in entry:
    if key not in COMPOSITION_FIELDS:
      raise ConfigError(f"{field}.{key}", f"unknown field; allowed: "
                        f"{', '.join(COMPOSITION_FIELDS)}")
  if "experts" not in entry:
    raise ConfigError(f"{field}.experts", "missing: the composition's members")
  overrides = entry.get("compose", {})
  merged = spec.overridden(cfg.compose, overrides, f"{field}.compose")
  checks.number(f"{field}.compose.kl_threshold", merged.kl_threshold, low=0)
  lam_field = f"{field}.compose.lam" if "lam" in overrides else "compose.lam"
  return entry.experts, merged, lam_field


def resolve(cfg: ml_collections.ConfigDict) -> list[System]:
  """cfg.systems as Systems; ConfigError naming the field for an unknown or empty member."""
  names = sorted(cfg.models.keys())
  out = []
  checks.choice("background", cfg.background, names)
  components = _components(cfg, names)
  spec.validate(cfg.compose)
  checks.number("compose.kl_threshold", cfg.compose.kl_threshold, low=0)
  for s in cfg.systems:
    if s in names:
      out.append(System(s, "single", (s,)))
    elif s in cfg.compositions:
      experts, compose, lam_field = composition(cfg, s)
      sectioned = isinstance(cfg.compositions[s], ml_collections.ConfigDict)
      checks.choices(f"compositions.{s}" + (".experts" if sectioned else ""), experts,
                     components)
      experts = list(experts)
      members = [(cfg.background, PROMPT)] + [components[c][:2] for c in experts]
      out.append(System(s, "composed", tuple(m for m, _ in members),
                        tuple(t for _, t in members),
                        _weights(compose, s, experts, components, lam_field), compose))
    elif s in MERGES:
      checks.choices("merge.experts", cfg.merge.experts, names)
      experts = tuple(cfg.merge.experts)
      members = (cfg.background,) + experts if s == "task_arithmetic" else experts
      out.append(System(s, s, members))
    elif s in baselines.BASELINES:
      out.append(System(s, "baseline", ()))
    else:
      raise ConfigError("systems", f"unknown system {s!r}: neither a model, a composition "
                        f"({', '.join(cfg.compositions.keys())}), a merge ({', '.join(MERGES)}) "
                        f"nor a baseline ({', '.join(baselines.BASELINES)})")
  if len({s.name for s in out}) != len(out):
    raise ConfigError("systems", f"names repeat: {list(cfg.systems)}")
  return out


def needed_models(systems: list[System]) -> list[str]:
  return list(dict.fromkeys(m for s in systems for m in s.members))


def fingerprint(directory: str) -> str:
  """A short hash of config.json and the shard names and sizes (cheap: no tensor is read)."""
  h = hashlib.sha1()
  with open(os.path.join(directory, "config.json"), "rb") as f:
    h.update(f.read())
  for name in sorted(os.listdir(directory)):
    if name.endswith(".safetensors") or name.endswith(".index.json"):
      h.update(f"{name}:{os.path.getsize(os.path.join(directory, name))}".encode())
  return h.hexdigest()[:12]


class Loaded(NamedTuple):
  models: dict       # name -> Model (shared objects per architecture)
  params: dict       # name -> params
  tokenizer: object  # the background's SentencePiece processor


def load(cfg: ml_collections.ConfigDict, paths: dict[str, str], names: list[str],
         workdir: str) -> Loaded:
  """Loads the named models (converted once into workdir/converted) and the background's
  tokenizer; CheckpointError when vocabularies or tokenizers differ."""
  dtype = jnp.dtype(cfg.dtype)
  by_config, models, params = {}, {}, {}
  for name in names:
    directory = paths[name]
    hf, where = loading.read_config(directory)
    c = gemma2.config_from_hf(hf, where)
    cache = os.path.join(workdir, "converted", f"{name}-{fingerprint(directory)}")
    _, params[name] = gemma2.load(directory, dtype=dtype, cache_dir=cache)
    models[name] = by_config.setdefault(c, gemma2.make_model(c, dtype))
  same_vocabulary([models[n] for n in names])
  background = cfg.background
  sp = gemma2.load_tokenizer(paths[background], models[background])
  pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
  for name in names:
    path = os.path.join(paths[name], "tokenizer.model")
    if name != background and os.path.isfile(path):
      other = loading.read_tokenizer(paths[name], models[name].vocab_size)
      if [other.id_to_piece(i) for i in range(other.get_piece_size())] != pieces:
        raise CheckpointError(f"{path!r} differs from the background's tokenizer: composition "
                              "needs one vocabulary")
  return Loaded(models, params, sp)


def same_architecture(loaded: Loaded, members) -> None:
  if len({id(loaded.models[m]) for m in members}) > 1:
    raise CheckpointError(f"merging needs one architecture; config.json differs among {members}")


def system_params(cfg: ml_collections.ConfigDict, loaded: Loaded, system: System
                  ) -> tuple[tuple[Model, ...], tuple[PyTree, ...]]:
  """The models and params a system decodes with (merges are computed here, on device)."""
  m = system.members
  if system.kind in ("single", "composed"):
    return tuple(loaded.models[n] for n in m), tuple(loaded.params[n] for n in m)
  same_architecture(loaded, m)
  merged = _merge(system.kind, float(cfg.merge.lam), [loaded.params[n] for n in m])
  return (loaded.models[m[0]],), (merged,)


@functools.partial(jax.jit, static_argnames=("kind", "lam"))
def _merge(kind: str, lam: float, params: list) -> PyTree:
  """Merged params, computed in float32 (task vectors of bfloat16 weights lose their low bits)
  and cast back to the checkpoints' dtype."""
  dtype = jax.tree.leaves(params[0])[0].dtype
  p32 = [jax.tree.map(lambda a: a.astype(jnp.float32), p) for p in params]
  if kind == "task_arithmetic":
    merged = arithmetic.task_arithmetic(p32[0], p32[1:], lam)
  else:
    merged = arithmetic.weight_average(p32)
  return jax.tree.map(lambda a: a.astype(dtype), merged)
