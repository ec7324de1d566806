"""How long requests are: joint (prompt, output) length distributions and the named presets shipped as quantile
tables (``presets/``)."""
