import click
def register(group): pass
