"""`python -m git_brat.grite`: the same as `git grite`."""

from git_brat.grite.cli import main

main()
