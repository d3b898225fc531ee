"""Fixture data only: the generator script is run by hand, never collected or imported."""

collect_ignore = ["make_fixtures.py"]
