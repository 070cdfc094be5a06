"""``python -m rebalancer.localkafka ARGS`` is ``rebalancer kafka ARGS``: the main CLI's parser and one-line errors
(``rebalancer.cli`` registers the ``kafka`` commands from ``localkafka.cli``; nothing here imports back)."""

import sys

from ..cli import main

args = sys.argv[1:]
debug = ["--debug"] if "--debug" in args else []
sys.exit(main([*debug, "kafka", *(a for a in args if a != "--debug")]))
