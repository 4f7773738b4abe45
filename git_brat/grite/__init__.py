"""git-grite: an append-only event log in git refs, replayed into issues, tasks and locks."""
