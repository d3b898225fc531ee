"""``python -m langgraph_stm``: the same as the ``langgraph-stm`` command."""

from langgraph_stm.cli import main

raise SystemExit(main())
