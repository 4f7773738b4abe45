"""The projection of the logs: the cache's SQLite file, snapshots in refs, their settled (cold) part.

Disposable: delete it and every answer is the same, only slower.
"""
