import sys

from elastic_agent.cli import main

sys.exit(main())
