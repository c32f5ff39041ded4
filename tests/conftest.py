"""Shared fixtures. Runtime kinds are listed in tests/conformance/conftest.py."""
