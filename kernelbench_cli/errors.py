"""The one exception type for bad user input: the CLI prints its message on one line and exits 2."""


class InputError(Exception):
    """Bad input the user can fix: missing file, bad YAML, unknown problem, malformed problem file."""
