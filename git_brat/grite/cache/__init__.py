"""The projection of the logs, disposable (delete it: the same answers, only slower): the cache's
SQLite file, snapshots committed to refs and their settled (cold) part."""
