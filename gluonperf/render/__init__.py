"""Records and their writers: the table people read, JSON lines and CSV; the report's plots (figures), one renderer per kind of record (kinds) and its page and template (page, templates/)."""
