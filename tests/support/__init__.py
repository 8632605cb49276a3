"""Helpers shared by the test modules (fixtures stay in the conftest.py files); nothing here runs at import."""
