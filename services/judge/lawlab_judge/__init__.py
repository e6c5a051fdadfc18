"""The judge service: validity (S_V) and structure recovery (S_S) verdicts."""
