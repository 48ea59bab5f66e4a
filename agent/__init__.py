"""Agent-side code. Import nothing here: `python -m agent.hook` loads this package first."""
