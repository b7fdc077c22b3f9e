"""Tests of the device path (a package, so its conftest does not shadow tests/conftest.py)."""
