"""Tests of baton.security; ``corpus`` is shared with store/NDJSON/log tests."""
