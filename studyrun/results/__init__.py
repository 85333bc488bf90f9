"""A results folder's files besides the store: analysis.json (its one reader, its provenance), the
file names an analysis writes, runs.csv and runs.parquet, and the report (report.md, report.html, figures)."""
