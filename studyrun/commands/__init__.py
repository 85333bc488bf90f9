"""What the command line's subcommands and the Python API do, each built from the packages below:
run a study (pipeline), read a results folder back (open_results), status and runs, diff, schema."""

from studyrun.results import records


def _load_types() -> object:
    """Every analysis type defined, so a results folder's analysis.json reads against its type's
    results model (imported only when one is read: a command that reads none stays fast)."""
    from studyrun.study.spec.registry import registry

    return registry()


records.load_types = _load_types
