"""Synthetic compositional scenes: renderer, split, detector, flow-matching model, sampler,
probes, analysis."""
