"""`python -m coordinator.cli.admin groups|offsets ...` (the same commands as `coordinator groups|offsets`)."""

from coordinator.cli.admin.cli import main

raise SystemExit(main(prog="python -m coordinator.cli.admin"))
