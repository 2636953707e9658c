"""``python -m throttlelab``: the same CLI as the ``throttlelab`` script."""

from throttlelab.cli import main

main(prog_name="throttlelab")
