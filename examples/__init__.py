"""Runnable examples of the agent SDK (`python -m examples.<name>`)."""
