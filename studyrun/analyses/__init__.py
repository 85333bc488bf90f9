"""Analysis types: one module each, gathered in one discriminated union on `type`."""
