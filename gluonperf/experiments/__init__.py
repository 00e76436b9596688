"""The chapter's experiments and the newer ones: plain functions that take models, contexts and sizes and return records; they neither parse arguments nor print."""
