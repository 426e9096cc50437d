"""Documentation build helpers (MkDocs hooks)."""
