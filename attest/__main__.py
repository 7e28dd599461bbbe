import sys

from attest.cli import main

sys.exit(main())
