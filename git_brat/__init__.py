"""git-brat: git-native coordination for running many AI coding agents on one repository."""

__version__ = "0.1.0"


def package_path() -> str:
    """PYTHONPATH for a child `python -m git_brat...`: this package's root first (a checkout
    run through bin/ is not installed), then whatever the caller had."""
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.pathsep.join([root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
