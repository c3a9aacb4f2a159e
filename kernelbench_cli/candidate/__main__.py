import sys

from .process import main

sys.exit(main(sys.argv[1:]))
