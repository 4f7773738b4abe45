"""`git brat ui`: a local web board of the log (the web stack is imported here only, lazily)."""
