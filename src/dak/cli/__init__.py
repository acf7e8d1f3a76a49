"""Command-line interface (``dak``)."""
