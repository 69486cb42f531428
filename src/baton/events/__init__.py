"""Canonical events: the model, the normalizers that produce it, bounds and stamping."""
