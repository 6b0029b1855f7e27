"""``python -m vixnb ...``: the command line without the console script (e.g. on a machine where the
package is on PYTHONPATH rather than installed)."""
import sys

from .cli import main

sys.exit(main())
