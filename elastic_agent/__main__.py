import sys

from elastic_agent.service.cli import main

sys.exit(main())
