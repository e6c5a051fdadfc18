"""The scorer service: numeric scores (S_N) against held-out data."""
