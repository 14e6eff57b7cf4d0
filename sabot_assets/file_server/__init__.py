"""The file server that runs beside the Dagster UI: reports, number pages and run records over http.

The Dagster UI renders metadata links but serves no files, and a browser refuses `file://` links
from an http page; so every file the UI links is served here (`addresses` builds the links,
`server` answers them, `record_pages` renders a sealed run record for a reader).
"""
