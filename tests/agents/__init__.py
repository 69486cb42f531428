"""Tests of baton's built-in runbook agent, driven as a real subprocess over stdio."""
