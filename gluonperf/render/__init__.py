"""Records and their writers: the table people read, JSON lines and CSV; the report's template."""
