import sys

from kueri.cli import main

sys.exit(main())
