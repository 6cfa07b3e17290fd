"""Logit composition of real language models on GSM8K, MATH, HumanEval+ and MBPP+, offline.

  python experiments/train.py --config=configs/llm.py:cpu --workdir=/tmp/llm_cpu
  python experiments/train.py --config=configs/llm.py:paper --workdir=/scratch/llm \
      --config.models.base=/ckpt/gemma-2-2b --config.models.math=/ckpt/gemma-2-2b_math \
      --config.models.coding=/ckpt/gemma-2-2b_coding \
      --config.benchmarks.gsm8k.path=/data/gsm8k/test.jsonl \
      --config.benchmarks.gsm8k.fewshot_path=/data/gsm8k/train.jsonl \
      --config.benchmarks.math.path=/data/math/test.jsonl \
      --config.benchmarks.humaneval_plus.path=/data/HumanEvalPlus.jsonl \
      --config.benchmarks.mbpp_plus.path=/data/MbppPlus.jsonl

Models are local Hugging Face Gemma-2 directories (config.json, *.safetensors, tokenizer.model;
nothing is downloaded); data are local jsonl files in the benchmarks' own schemas. Systems are
what gets scored: a model of `models` alone, a composition of `compositions` (experts over
`background`, each a model or a `components` entry: a model under its own prompt template), or
a merge: `task_arithmetic` (background + lam * sum of task vectors) and `weight_average` (of
`merge.experts`). `compose` is the step spec of every composition (composition/spec.py: the
operator, its weights, a plausibility mask, selective gating, the EOS rule), which a composition
given as a section overrides for itself; `generate` how tokens are picked (greedy, or sampled:
temperature, top_k, top_p, min_p, a key per problem).
Plain, masked and selective composition side by side (variants of `compositions`):
  --config.systems="('composed', 'composed_masked', 'composed_selective', 'composed_top1')"
Classifier-free guidance with guidance scale g (one model under two prompts):
  --config.systems="('base','guided')" --config.compose.operator=paper \
  --config.components.unconditional.weight=-0.5     # 1 - g for g = 1.5: p_c^g p_u^(1-g)
(docs/composition_spec.md gives DExperts, proxy-tuning and contrastive decoding as configs).

The skills llm_data generates (issue 38) are benchmarks too: --config.run="('arith', 'funcs',
'strings', 'cross')" with each path (and arith's and strings' fewshot_path) set to the files
llm_data.build.benchmark_settings(DIR) names.
HumanEval and MBPP as distributed (scored by their own tests; docs/code_benchmarks.md):
  --config.run="('humaneval', 'mbpp')" --config.benchmarks.humaneval.path=HumanEval.jsonl.gz \
  --config.benchmarks.mbpp.path=mbpp.jsonl      # jsonl files may be gzip-compressed

Trivial baselines (llm_eval/baselines.py) are systems without a model, e.g.
  --config.systems="('base', 'math', 'last_number', 'majority')" \
  --config.baselines.train.gsm8k=/data/gsm8k/train.jsonl
GSM8K is scored by flexible-extract (the paper's headline; benchmarks.gsm8k.extract=strict for
strict-match), arith by strict-match.

Presets: paper (Gemma-2-2B base + MergeBench math and coding experts, the paper's protocol: greedy,
512 new tokens, bfloat16; a GPU), cpu (tiny random Gemma-2 models written into WORKDIR/models and
the hand-made benchmark files of tests/fixtures/llm_eval: the whole pipeline in minutes on a CPU;
the models are random, so every score is 0), tiny (tests). Add a third expert with
--config.models.instruction=DIR --config.systems="(..., 'composed_3')" (the paper's limitation).
"""

import os

import ml_collections

from compgen_jax.composition import spec
from compgen_jax.llm_eval import benchmarks

PRESETS = ("paper", "cpu", "tiny")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                        "llm_eval")


def base() -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict()
  cfg.app = "llm"  # apps.APPS: what experiments/train.py runs
  cfg.seed = 0  # sampling (generate.greedy=False) and the cpu preset's random models
  cfg.models = ml_collections.ConfigDict(dict(base="", math="", coding="", instruction=""))
  cfg.background = "base"
  cfg.dtype = "bfloat16"
  # A component is a model under a prompt template ("{prompt}" stands for the benchmark's
  # prompt) with its weight lambda as an expert (a model's own name is that model under
  # "{prompt}" at weight 1; compose.lam, when given, overrides every weight). `unconditional`:
  # the background with no prompt (BOS alone), CFG's unconditional term at weight 1 - g for
  # guidance g = 1.5 (the `guided` system, with compose.operator=paper).
  cfg.components = ml_collections.ConfigDict(dict(
      unconditional=ml_collections.ConfigDict(dict(model="base", template="", weight=-0.5))))
  # A composition: its experts (a tuple, decoded under `compose`), or a section {experts,
  # compose} whose `compose` overrides the global fields it names, so one run scores the same
  # experts under several step specs side by side (the variants below; add one in a config
  # file, or change a field a variant names:
  # --config.compositions.composed_masked.compose.mask_p=0.8).
  cfg.compositions = ml_collections.ConfigDict(dict(
      composed=("math", "coding"), composed_3=("math", "coding", "instruction"),
      guided=("unconditional",),
      composed_masked=dict(experts=("math", "coding"), compose=dict(mask="top_p", mask_p=0.9)),
      composed_selective=dict(experts=("math", "coding"), compose=dict(gate="kl", gate_tau=0.1)),
      composed_top1=dict(experts=("math", "coding"), compose=dict(gate="top1", gate_tau=0.1)),
      composed_3_eos_min=dict(experts=("math", "coding", "instruction"),
                              compose=dict(eos="min"))))
  # The step spec (composition/spec.py): operator authors (sum_i log p_i - log p_b, their
  # notebook) or paper (weights lam, one per expert; () = all ones; signed weights give
  # DExperts, proxy-tuning, contrastive decoding, CFG); mask none | top_p (the background's
  # nucleus of mass mask_p) | alpha (p_b >= mask_alpha max p_b); gate none | kl (expert i only
  # where KL(p_i||p_b) > gate_tau) | top1; eos composed | background | vote | min.
  # kl_threshold: the diagnostics' activity threshold on KL.
  cfg.compose = ml_collections.ConfigDict(dict(
      lam=(), kl_threshold=0.1, **spec.spec_fields(operator="authors")))
  cfg.merge = ml_collections.ConfigDict(dict(experts=("math", "coding"), lam=1.0))
  cfg.systems = ("base", "math", "coding", "composed", "task_arithmetic", "weight_average")
  cfg.generate = ml_collections.ConfigDict(dict(
      max_new_tokens=512, batch_size=8, prefill_chunk=512, pad_to=128, greedy=True,
      temperature=1.0, **spec.truncation_fields(),  # top_k 0 / top_p 1 / min_p 0: off
      # > 0: compositions decode speculatively, the background drafting this many tokens a
      # round (composition/speculative.py; greedy: the same tokens and diagnostics; sampling:
      # samples of the same distribution, not the same draws); rows record drafted, accepted
      draft_len=0,
      # True: models of one architecture (same config) decode as one vmapped forward over
      # stacked params (composition/stacked.py; the same tokens; docs/composition_decoding.md says
      # when it pays)
      stack_models=False))
  cfg.run = ("gsm8k", "math", "humaneval_plus", "mbpp_plus")
  cfg.benchmarks = ml_collections.ConfigDict(
      {name: b.default_settings() for name, b in benchmarks.BENCHMARKS.items()})
  # The trivial baselines (llm_eval/baselines.py: last_number, product_first_two,
  # nearest_train, majority), scored as systems without a model when `systems` names them;
  # nearest_train and majority read each benchmark's training problems from train.<benchmark>
  # (a jsonl file in its test file's schema)
  cfg.baselines = ml_collections.ConfigDict(dict(train=ml_collections.ConfigDict(
      dict.fromkeys(benchmarks.BENCHMARKS, ""))))
  # cpu / tiny: random Gemma-2 models (experts = base + noise) and a byte-fallback tokenizer
  # trained on the benchmark prompts, written to WORKDIR/models/<name> for every empty path.
  cfg.tiny_models = ml_collections.ConfigDict(dict(
      enabled=False, vocab_size=512, width=64, num_layers=4, num_heads=4, num_kv_heads=2,
      head_dim=16, mlp_dim=128, sliding_window=64, expert_noise=0.05))
  return cfg


def _fixture_benchmarks(cfg: ml_collections.ConfigDict) -> None:
  b = cfg.benchmarks
  b.gsm8k.update(path=os.path.join(FIXTURES, "gsm8k_test.jsonl"),
                 fewshot_path=os.path.join(FIXTURES, "gsm8k_train.jsonl"))
  b.math.path = os.path.join(FIXTURES, "math_test.jsonl")
  b.humaneval_plus.path = os.path.join(FIXTURES, "humaneval_plus.jsonl")
  b.mbpp_plus.path = os.path.join(FIXTURES, "mbpp_plus.jsonl")
  b.mbpp.path = os.path.join(FIXTURES, "mbpp.jsonl")


def get_config(preset: str = "cpu") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = base()
  if preset == "paper":
    # The paper's protocol, stated here although base() holds it (--print_config prints it):
    # greedy decoding of 512 new tokens in bfloat16, the authors' operator, the four benchmarks,
    # the three systems and two merges of Gemma-2-2B with its math and coding experts.
    cfg.dtype = "bfloat16"
    cfg.compose.operator = "authors"
    cfg.generate.update(max_new_tokens=512, greedy=True)
    cfg.systems = ("base", "math", "coding", "composed", "task_arithmetic", "weight_average")
    cfg.run = ("gsm8k", "math", "humaneval_plus", "mbpp_plus")
    cfg.tiny_models.enabled = False
  elif preset in ("cpu", "tiny"):
    cfg.dtype = "float32"
    cfg.tiny_models.enabled = True
    cfg.systems = cfg.systems + ("composed_3",)
    _fixture_benchmarks(cfg)
    cfg.generate.update(max_new_tokens=64, batch_size=4, pad_to=256)
    if preset == "tiny":
      cfg.tiny_models.update(width=32, num_layers=2, mlp_dim=64)
      cfg.generate.update(max_new_tokens=16)
      cfg.systems = ("base", "composed", "task_arithmetic", "composed_3")
      cfg.run = ("gsm8k", "humaneval_plus")
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
