"""The `streamrec` command line: parses arguments and wires them to the code they run.

Nothing below imports from here. Commands import their heavy dependencies (torch, confluent-kafka)
inside their bodies so that `streamrec --help` stays instant.
"""
