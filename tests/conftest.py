"""Fixtures shared across the suite."""

from tests.support.harness import harness

__all__ = ["harness"]
