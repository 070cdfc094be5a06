import sys

from .cli import main

if __name__ == "__main__":  # not when a spawned child process re-imports the main module
    sys.exit(main())
