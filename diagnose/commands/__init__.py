"""One module per CLI sub-command: what it does once the arguments are parsed. The CLI only parses,
prints and maps outcomes to exit codes.
"""
