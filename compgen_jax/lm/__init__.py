"""Autoregressive models behind one adapter (`model.Model`) and the attention they share."""
