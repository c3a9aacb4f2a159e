import atexit

from . import trace

trace.mark("parent", "python up")
atexit.register(trace.mark, "parent", "exit")

from .cli import main  # noqa: E402  (after the first mark: importing the CLI is part of what is traced)

main()
