"""grite's model, pure: events and their wire format, the CRDT replay, the kinds of entity. No I/O."""
