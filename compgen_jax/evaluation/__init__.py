"""Evaluators and probes: separate jitted passes over (saved) run states."""
