"""What a person reads: figures with one style (families, fixed-size panels, legends outside), the check that
they stay readable, and self-contained HTML pages. Loads matplotlib only in the modules that draw."""
