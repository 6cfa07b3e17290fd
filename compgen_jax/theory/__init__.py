"""Constructive networks for the paper's approximation theorem (Theorem 3.1)."""
