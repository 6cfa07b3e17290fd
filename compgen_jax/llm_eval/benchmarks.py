"""The registry of benchmarks, read from local jsonl files (plain or gzip): the logit-composition
paper's four, HumanEval and MBPP as distributed (scored by their own tests: functional.py), and
the four skills llm_data generates (arith in GSM8K's protocol, strict-match by default, funcs and
cross in HumanEval+'s, strings by exact match; issue 38's CPU-sized LLM study).

Each Benchmark turns its files into Problems (the exact prompt, and what scoring needs) and
stop-truncated completions into one JSON-serialisable dict per problem with at least "correct"
and "extracted". Nothing is downloaded.
"""

from compgen_jax.llm_eval import evalplus, exact_match, functional, gsm8k, hendrycks_math
from compgen_jax.llm_eval.base import Benchmark, Problem, truncate

BENCHMARKS: dict[str, Benchmark] = {
    "gsm8k": gsm8k.BENCHMARK,
    "math": hendrycks_math.BENCHMARK,
    "humaneval_plus": evalplus.HUMANEVAL_PLUS,
    "mbpp_plus": evalplus.MBPP_PLUS,
    "humaneval": functional.HUMANEVAL,
    "mbpp": functional.MBPP,
    "arith": gsm8k.ARITH,
    "funcs": evalplus.make("funcs", "humaneval"),
    "strings": exact_match.make("strings"),
    "cross": evalplus.make("cross", "humaneval"),
}

__all__ = ["BENCHMARKS", "Benchmark", "Problem", "truncate"]
