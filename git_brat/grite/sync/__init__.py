"""Sync through the user's own remotes, one module a job: exchange (sync, a first fetch of new
remotes, add-sync, deepen: the operations), install (refspecs, hook shims, info/exclude), imports
(fetched logs in), publish (this replica's log out), first_fetch (a clone cut at a snapshot),
hook (what the shims run), shims (the hook files). This file imports none of them: a command
that needs one part (status asks whether the hooks are live) loads only that part."""
