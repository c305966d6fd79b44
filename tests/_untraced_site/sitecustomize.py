"""On a measured child's PYTHONPATH (``_children.traced_parent``): the processes it starts run
without coverage's tracer; the child itself was measured from its start."""

import os

os.environ.pop("COVERAGE_PROCESS_START", None)
