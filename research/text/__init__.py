"""Text utilities with no knowledge of the app: words and BM25, page text from HTML/PDF bytes, quote matching.

A leaf: nothing here imports from research, workers or researchsite.
"""
