"""Fixtures for the board's tests (helpers in boardkit.py)."""
