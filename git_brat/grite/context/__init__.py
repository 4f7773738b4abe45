"""grite's code context: the symbols of the tracked files (index.py, derived locally from blob
ids, never synced) and the project's context key/values (project.py, events that sync)."""
