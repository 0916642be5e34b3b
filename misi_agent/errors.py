"""The one error type the CLI turns into a one-line message and a non-zero exit."""


class MisiError(ValueError):
    """Bad input or an impossible request; ``str(error)`` is a single line for the user."""
