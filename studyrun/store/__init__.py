"""The run store (runs.sqlite): runs and their series written a batch at a time, a read-only view,
and a finished folder's runs read back exactly (what a grown doe design builds on)."""
