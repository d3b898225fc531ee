"""The package version, read by hatch at build time (one place)."""

__version__ = "0.1.0"
