"""The on-call terminal UI (Textual). Nothing imports this package."""
