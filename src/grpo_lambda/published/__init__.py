"""Published numbers of arXiv 2510.00194, as data for side-by-side comparison (see README.md)."""
