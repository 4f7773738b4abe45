"""`python -m git_brat.brat`: the same as `git brat`."""

from git_brat.brat.cli import main

main()
