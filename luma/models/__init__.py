"""``ask`` and model providers: one neutral message/tool/schema model, one file per provider."""
