"""git itself: the only package that runs the git binary or opens dulwich (refs, objects,
remotes, work trees, merges). It knows nothing of grite's refs or brat's roles."""
