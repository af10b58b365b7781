from pylog.cli.main import main

raise SystemExit(main())
