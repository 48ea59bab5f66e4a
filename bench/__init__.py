"""Gatehouse benchmarks: `python -m bench` measures every figure of issue 9 side by side.

Each figure is a module `bench.fig_*` with `run(env) -> Figure`; the orchestrator in
`bench.__main__` starts the services they need (a private Redis, scratch databases,
Daphne or Uvicorn processes), runs them in one go, and writes the results.
"""
