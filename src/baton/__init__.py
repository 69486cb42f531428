"""baton: drive teams of ACP coding agents coordinated through FCoP files."""

__all__ = ["__version__"]

__version__ = "0.1.0"
