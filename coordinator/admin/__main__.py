"""`python -m coordinator.admin groups|offsets ...` (the same commands as `coordinator groups|offsets`)."""

from coordinator.admin.cli import main

raise SystemExit(main(prog="python -m coordinator.admin"))
