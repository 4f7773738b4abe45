"""The event log in refs/grite/*: appended by compare-and-swap, read back, kept after a rewind.

Also who wrote them (identities), the refs' layout, and where a cut clone's history starts."""
