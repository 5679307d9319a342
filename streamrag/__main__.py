from streamrag.cli import main

raise SystemExit(main())
