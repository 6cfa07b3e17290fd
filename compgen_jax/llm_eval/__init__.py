"""Offline scoring of generated completions on GSM8K, MATH, HumanEval+ and MBPP+."""
