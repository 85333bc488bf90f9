"""y = a + b, vectorized: with a, b ~ N(0, 1) correlated 0.8, std(y) = sqrt(2 + 2 * 0.8) = 1.897."""


def correlated_sum(a, b):
    return {"y": a + b}
