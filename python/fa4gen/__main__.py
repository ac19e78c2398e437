"""python -m fa4gen: the bundled fa4gen CLI (as the fa4gen command)."""
import sys

from fa4gen import main

sys.exit(main())
