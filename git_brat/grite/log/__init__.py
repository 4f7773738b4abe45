"""The event log in refs/grite/*: appending batches by compare-and-swap, reading them, who wrote
them, the refs' layout, logs kept after a rewind, and where a cut clone's history starts."""
