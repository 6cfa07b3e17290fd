"""Issue 38's LLM study as one resumable program (configs/llm_study.py; an application:
apps.py): llm_data -> lm_train's background and experts -> llm_eval's scoring of every system
and its diagnostics pass, each stage the stage's own library call (pipeline.py)."""
