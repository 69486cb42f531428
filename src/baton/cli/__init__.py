"""The baton command line."""
