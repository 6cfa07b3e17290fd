"""Students: networks that map (phi(z), x) to predictions."""
