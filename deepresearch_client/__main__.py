from deepresearch_client.cli import main

raise SystemExit(main())
