"""`python -m cli ...`: the same commands as the `streamrec` console script (services spawn
their siblings this way, with the interpreter that runs them)."""

from cli.app import app

app(prog_name="streamrec")
