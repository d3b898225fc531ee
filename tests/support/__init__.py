"""Helpers shared by the tests (graphs, scripted models)."""
