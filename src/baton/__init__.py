"""baton: drive teams of ACP coding agents coordinated through FCoP files."""

__version__ = "0.1.0"
