from coordinator.cli.main import main

raise SystemExit(main())
