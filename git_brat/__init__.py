"""git-brat: git-native coordination for running many AI coding agents on one repository."""

__version__ = "0.1.0"
