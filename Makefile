# Set-up and the two entry points of the README. Every target creates or reuses .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
WORKDIR ?= workdirs/quick

.PHONY: venv demo test lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) experiments/train.py --config=configs/hyperteacher.py:quick --workdir=$(WORKDIR)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest -n 2 --dist=loadgroup --max-worker-restart=0 tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/throughput.py

# Composed decoding against the physical limit, the authors' Hugging Face PyTorch loop and
# speculative decoding, tiny and small sizes (docs/composition_decoding.md). torch and transformers are
# never project dependencies: venv-hf adds the bench-hf extra to .venv, with torch's CPU-only
# wheel where $(WHEELS) has one (pip would otherwise take the newest build, CUDA's).
WHEELS ?= /opt/wheels
TORCH_WHEEL ?= $(firstword $(wildcard $(WHEELS)/torch-*+cpu-*.whl))
HF_STAMP := $(VENV)/.installed-hf
.PHONY: venv-hf bench-hf
venv-hf: $(HF_STAMP)

$(HF_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench-hf]' $(TORCH_WHEEL)
	touch $(HF_STAMP)

BENCH_HF := $(PY) benchmarks/compose_llm_speed.py --hf --hf_threads=1,0 --prompt_len=64 \
	--min_prompt_len=32 --draft_len=4 --agreement=1,0.9,0 --repeats=3
bench-hf: $(HF_STAMP)
	$(BENCH_HF) --size=tiny --batch=4 --new_tokens=64
	$(BENCH_HF) --size=small --batch=2 --new_tokens=32

clean:
	rm -rf $(VENV) workdirs

# The paper's experiments at CPU scale (configs/sweeps/*.py:cpu, sized for a 5 h budget on 2
# cores; their measured times, per sweep and in all: results/cpu/NOTES.md): each sweep into
# results/cpu/<experiment>/, then its REPORT.md; Theorem 3.1 (reproduce-cpu-theorem); and last
# the claims table of every report (results/cpu/claims.json, results/cpu/README.md).
# `make -k reproduce-cpu` goes on past a sweep with failed programs (its report still lists
# them); re-running resumes.
CPU_RESULTS ?= results/cpu
# programs of a sweep run at once, each on its own share of the cores (sweep.py --parallel): on
# 2 cores two programs on one core each do more work than one on both end to end
# (benchmarks/core_sharing.py; the measured gain: results/cpu/NOTES.md); results/cpu/NOTES.md
# says which committed sweeps ran this way
CPU_PARALLEL ?= 2
CPU_SWEEPS := data_scaling model_size encoding_table encoding_width scaling_law task_support \
	transformer_vs_mlp preference_data_scaling preference_model_size preference_task_support
# Not in reproduce-cpu (checks behind a design choice, not claims of the paper; with them the
# sum would pass the 5 h budget; their reports still regenerate from the committed rows):
# `make reproduce-cpu-encoding_steps`, `make reproduce-cpu-encoding_nonlinearity` and
# `make reproduce-cpu-preference_steps` (at the paper's 4 objects, why the preference sweeps above
# use 2); their measured times: results/cpu/NOTES.md. Also run alone, for the same budget:
# `make reproduce-cpu-decodability_fit` (the decodability claim at fixed fit, issue 40).
PROBE_SWEEPS := data_scaling model_size encoding_table encoding_width encoding_steps \
	encoding_nonlinearity preference_data_scaling preference_model_size decodability_fit

.PHONY: reproduce-cpu claims-cpu
# The sweeps through a sub-make (it inherits -k and -j), so the claims table is remade after
# them even when one failed; the exit status is still the sweeps'.
reproduce-cpu: $(STAMP)
	$(MAKE) $(addprefix reproduce-cpu-,$(CPU_SWEEPS)) reproduce-cpu-theorem; status=$$?; \
	  $(MAKE) claims-cpu && exit $$status

claims-cpu: $(STAMP)
	$(PY) experiments/claims.py --results_dir=$(CPU_RESULTS)

reproduce-cpu-%: $(STAMP)
	$(PY) experiments/sweep.py --config=configs/sweeps/$*.py:cpu --sweep_dir=$(CPU_RESULTS)/$* \
	    --parallel=$(CPU_PARALLEL) $(if $(filter $*,$(PROBE_SWEEPS)),--probe); status=$$?; \
	  $(PY) experiments/report.py --sweep_dir=$(CPU_RESULTS)/$* && exit $$status

# Theorem 3.1's construction and bounds (configs/theorem.py:quick, minutes on 2 cores; its
# measured time: results/cpu/NOTES.md): the binary writes results/cpu/theorem/theorem.jsonl,
# then report.md, claims.json and the PNGs from those rows (python experiments/report.py
# --dir=results/cpu/theorem regenerates them alone).
.PHONY: reproduce-cpu-theorem
reproduce-cpu-theorem: $(STAMP)
	$(PY) experiments/train.py --config=configs/theorem.py:quick --workdir=$(CPU_RESULTS)/theorem

# Image composition at CPU scale (configs/sweeps/images.py:cpu): one experiments/train.py
# program per width (then evaluate.py and probe.py on its latest checkpoint), two at a time, then
# results/cpu/images/report.md and claims.json from their rows; re-running resumes. Not part of
# reproduce-cpu (its claims rows join the table at `make claims-cpu`).
.PHONY: reproduce-cpu-images
reproduce-cpu-images: $(STAMP)
	$(PY) experiments/sweep.py --config=configs/sweeps/images.py:cpu \
	    --sweep_dir=$(CPU_RESULTS)/images --parallel=$(CPU_PARALLEL) --evaluate --probe; \
	  status=$$?; $(PY) experiments/report.py --sweep_dir=$(CPU_RESULTS)/images && exit $$status

# Letters at the authors' own setting (configs/letters.py:authors: one pass per position,
# independent inits, GPT-2's init): k = 1..8 experts composed over one background, and the
# baselines (joint, weight averaging, task arithmetic) of the two pairs and of each k, into
# results/cpu/letters/runs/authors_position_gpt2_k (its rows are committed, not its
# checkpoints), then the letters report and the claims table. Estimated time (one timed
# short run): results/cpu/letters/notes.md.
LETTERS_K_DIR ?= $(CPU_RESULTS)/letters/runs/authors_position_gpt2_k
.PHONY: reproduce-cpu-letters-k
reproduce-cpu-letters-k: $(STAMP)
	$(PY) experiments/train.py --config=configs/letters.py:authors --workdir=$(LETTERS_K_DIR) \
	    --config.experiments="('substitution','baselines','k_experts','k_baselines')"
	$(PY) experiments/report.py --dir=$(CPU_RESULTS)/letters
	$(MAKE) claims-cpu

# Issue 38's LLM study (configs/llm_study.py): llm_data's corpora, skills and tokenizer, a
# Gemma-2 background, an expert per skill fine-tuned from it (3 seeds; quick: 1), every system
# (background, experts, compositions, merges, joint) scored on each skill's held-out-template
# test set with each seed's experts, then the compositions' decodes diagnosed
# (llm_eval/diagnose.py: AUC of each quantity for failure); the report's intervals over seeds
# and problems and its paired comparisons (llm_eval/comparisons.py); one experiments/train.py
# program, resumable (re-running skips finished stages and resumes the interrupted one;
# WORKDIR/stages.jsonl has each stage's wall time). reproduce-cpu-llm: the cpu preset into
# results/cpu/llm (2 h 6 min measured on 2 cores before issue 55's data and 200 problems, not
# timed since); reproduce-cpu-llm-quick: the quick preset into $(LLM_QUICK_DIR) (about 15 min
# measured since issue 55: results/cpu/llm/NOTES.md; one expert seed: with 3 it cannot fit).
LLM_QUICK_DIR ?= workdirs/llm_study_quick
.PHONY: reproduce-cpu-llm reproduce-cpu-llm-quick
reproduce-cpu-llm: $(STAMP)
	$(PY) experiments/train.py --config=configs/llm_study.py:cpu --workdir=$(CPU_RESULTS)/llm

reproduce-cpu-llm-quick: $(STAMP)
	$(PY) experiments/train.py --config=configs/llm_study.py:quick --workdir=$(LLM_QUICK_DIR)
