"""What the command line's subcommands and the Python API do, each built from the packages below:
run a study (pipeline), read a results folder back (open_results), status and runs, diff, schema."""
