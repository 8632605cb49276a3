"""The local document collection: indexing files, ranking them for a query, and the links workers fetch."""
