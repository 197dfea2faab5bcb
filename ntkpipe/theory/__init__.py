"""Closed forms and ODEs the studies overlay on their measurements."""
