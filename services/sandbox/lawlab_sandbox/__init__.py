"""The sandbox service: runs all untrusted code (agent code and submissions)."""
