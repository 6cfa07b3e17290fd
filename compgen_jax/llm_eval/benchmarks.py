"""The registry of the logit-composition paper's four benchmarks, read from local jsonl files.

Each Benchmark turns its files into Problems (the exact prompt, and what scoring needs) and
stop-truncated completions into one JSON-serialisable dict per problem with at least "correct"
and "extracted". Nothing is downloaded.
"""

from compgen_jax.llm_eval import evalplus, gsm8k, hendrycks_math
from compgen_jax.llm_eval.base import Benchmark, Problem, truncate

BENCHMARKS: dict[str, Benchmark] = {
    "gsm8k": gsm8k.BENCHMARK,
    "math": hendrycks_math.BENCHMARK,
    "humaneval_plus": evalplus.HUMANEVAL_PLUS,
    "mbpp_plus": evalplus.MBPP_PLUS,
}

__all__ = ["BENCHMARKS", "Benchmark", "Problem", "truncate"]
