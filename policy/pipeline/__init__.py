"""The decision pipeline (SPEC §4): request → lookup → validation → hooks → rules → modes."""

from policy.pipeline.engine import decide

__all__ = ["decide"]
