"""git-brat: the harness (convoys, tasks, roles) built on the grite substrate."""
