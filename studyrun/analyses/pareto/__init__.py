"""Multi-objective and robust optimisation (`optimize` with `method: nsga2 | nsga3`): the
objectives and constraints, the search through pymoo a generation a batch, and its report."""
