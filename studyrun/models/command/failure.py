"""The exception carrying one run's failure message inside the batch loop."""


class _RunFailed(Exception):
    """One run's failure message, raised and caught inside the batch loop."""
