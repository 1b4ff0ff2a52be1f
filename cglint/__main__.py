from cglint.cli import main

raise SystemExit(main())
