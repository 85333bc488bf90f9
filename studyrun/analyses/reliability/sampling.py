"""The sampling estimators of pf in the standard normal space: crude Monte Carlo and importance
sampling in growing rounds, and subset simulation (Au and Beck 2001) level by level.

Each takes g (standard normal rows -> limit state, NaN where a run gave none) and a seed, so the
same seed gives the same points whatever the execution's batch size. Formulas: docs/methods.md,
"Reliability: the probability of failure".
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from studyrun.analyses.reliability.space import GFunction

Fails = Callable[[np.ndarray], np.ndarray]
CONFIDENCE = 0.95
Z95 = 1.959963984540054
# subset's chains: the acceptance rate their spread aims at, and its first scale (Papaioannou,
# Betz, Zwirglmaier and Straub 2015); measured in benchmarks/bench_reliability.py
ACCEPTANCE, LAMBDA = 0.44, 0.6


def stream(seed: np.random.SeedSequence, *key: int) -> np.random.Generator:
    """The generator of one part of the analysis (a round, a level), from the study's seed."""
    return np.random.default_rng(np.random.SeedSequence(seed.entropy,
                                                        spawn_key=(*seed.spawn_key, *key)))


def grown(done: int, cov: float | None, target: float, most: int) -> int:
    """The runs after the next round: as many as the cov so far says the target needs
    (cov^2 falls as 1 / runs; 5% more for safety), at least 1/8 more and at most twice as many
    as so far (twice where no run failed yet), and never past `most`."""
    if cov is None:
        return min(2 * done, most)
    needed = int(np.ceil(done * (cov / target) ** 2 * 1.05))
    return min(max(needed, done + max(1, done // 8)), 2 * done, most)


def beta_of(pf: float | None) -> float | None:
    """The generalised reliability index -Phi^-1(pf)."""
    from scipy.special import ndtri

    return None if pf is None or not 0 < pf < 1 else float(-ndtri(pf))


def estimate(pf: float | None, cov: float | None, ci: list[float] | None, runs: int,
             method: str, converged: bool, convergence: list[dict[str, Any]]) -> dict[str, Any]:
    """The common part of every method's results."""
    return {"pf": pf, "beta": beta_of(pf), "cov": cov, "ci": ci, "runs": runs, "method": method,
            "converged": converged, "convergence": convergence}


def below_bound(failed: int, n: int) -> float:
    """The one-sided 95% upper bound of pf after `n` runs with `failed` failures (Clopper-Pearson;
    1 - 0.05^(1/n), about 3/n, when none failed)."""
    from scipy.stats import beta

    return 1.0 if failed >= n else float(beta.ppf(CONFIDENCE, failed + 1, n - failed))


def binomial_ci(failed: int, n: int) -> list[float]:
    """The two-sided 95% Clopper-Pearson interval of a proportion."""
    from scipy.stats import beta

    low = 0.0 if failed == 0 else float(beta.ppf(0.025, failed, n - failed + 1))
    high = 1.0 if failed == n else float(beta.ppf(0.975, failed + 1, n - failed))
    return [low, high]


def no_failure(result: dict[str, Any], failed: int, n: int) -> dict[str, Any]:
    """A study where no run failed: pf is below a bound, never zero."""
    bound = below_bound(failed, n)
    result.update(pf=None, beta=None, cov=None, ci=[0.0, bound], pf_below=bound,
                  beta_above=beta_of(bound), converged=False)
    result.setdefault("warnings", []).append(
        f"no run of {n:,} failed: pf is below {bound:.3g} (the one-sided 95% upper bound), not "
        "zero; to measure it, raise max_runs or use subset, form or importance")
    return result


def monte_carlo(g: GFunction, fails: Fails, d: int, seed: np.random.SeedSequence, start: int,
                cov_target: float, max_runs: int) -> dict[str, Any]:
    """Crude Monte Carlo: rounds of standard normal draws, grown to the runs the cov so far says
    the target needs (`grown`), until the cov of pf reaches the target or the runs reach
    max_runs."""
    failed = kept = 0
    convergence: list[dict[str, Any]] = []
    done, total, k = 0, min(start, max_runs), 0
    while True:
        values = g(stream(seed, 1, k).standard_normal((total - done, d)))
        done, k = total, k + 1
        ok = ~np.isnan(values)
        kept += int(ok.sum())
        failed += int(fails(values[ok]).sum())
        pf = failed / kept if kept else None
        cov = float(np.sqrt((1 - pf) / (kept * pf))) if pf else None
        convergence.append({"runs": done, "pf": pf, "cov": cov})
        if (cov is not None and cov <= cov_target) or done >= max_runs:
            break
        total = grown(done, cov, cov_target, max_runs)
    result = estimate(pf, cov, binomial_ci(failed, kept) if kept else None, done, "monte_carlo",
                      cov is not None and cov <= cov_target, convergence)
    result["failures"] = failed
    return no_failure(result, failed, kept) if kept and not failed else result


def importance(g: GFunction, fails: Fails, centre: np.ndarray, seed: np.random.SeedSequence,
               start: int, cov_target: float, max_runs: int) -> dict[str, Any]:
    """Importance sampling from the standard normal shifted to the design point `centre`,
    weighted by phi(u) / phi(u - centre); rounds grow (`grown`) until the cov reaches the
    target."""
    centre = np.asarray(centre, dtype=float)
    terms: list[np.ndarray] = []
    convergence: list[dict[str, Any]] = []
    done, pf, cov, failed = 0, None, None, 0
    shift = centre @ centre / 2
    total, k = min(start, max_runs), 0
    while True:
        u = centre + stream(seed, 2, k).standard_normal((total - done, len(centre)))
        values = g(u)
        done, k = total, k + 1
        ok = ~np.isnan(values)
        hit = fails(values[ok])
        failed += int(hit.sum())
        terms.append(np.where(hit, np.exp(shift - u[ok] @ centre), 0.0))
        every = np.concatenate(terms)
        pf = float(every.mean()) if len(every) else None
        sd = float(every.std(ddof=1) / np.sqrt(len(every))) if len(every) > 1 else None
        cov = sd / pf if pf and sd is not None else None
        convergence.append({"runs": done, "pf": pf, "cov": cov})
        if (cov is not None and cov <= cov_target) or done >= max_runs:
            break
        total = grown(done, cov, cov_target, max_runs)
    n = sum(len(t) for t in terms)
    if not failed:
        result = estimate(None, None, None, done, "importance", False, convergence)
        result["warnings"] = [f"no run of {n:,} around the design point failed: the design "
                              "point is not on the limit state; check form's results"]
        return result
    half = Z95 * cov * pf  # type: ignore[operator]
    result = estimate(pf, cov, [max(pf - half, 0.0), pf + half], done, "importance",  # type: ignore[operator]
                      cov is not None and cov <= cov_target, convergence)
    result["failures"] = failed
    return result


def subset(g: GFunction, fails: Fails, d: int, seed: np.random.SeedSequence, per_level: int,
           p0: float, max_runs: int) -> dict[str, Any]:
    """Subset simulation: Monte Carlo, then levels of intermediate failure domains g <= b_i,
    each holding the p0 fraction of the previous level's runs, populated by Markov chains from
    those seeds (adaptive conditional sampling). The cov counts the correlation of the states
    within a level and across levels (`spread`)."""
    chains = max(int(round(p0 * per_level)), 1)
    length = per_level // chains
    n = chains * length
    rng = stream(seed, 3)
    evaluated = [0]

    def counted(points: np.ndarray) -> np.ndarray:
        evaluated[0] += len(points)
        return g(points)

    u = rng.standard_normal((n, d))
    values = counted(u)
    product, deltas = 1.0, []
    roots, deviation = np.arange(n), np.zeros(n)  # each state's level-0 ancestor; its share
    convergence: list[dict[str, Any]] = []
    levels: list[float] = []
    states_by_chain = None  # (chains, length) indices of the level's states, None at level 0
    converged = False
    pf = None
    while True:
        order = np.argsort(np.where(np.isnan(values), np.inf, values), kind="stable")
        ranked = values[order]
        hit = fails(np.nan_to_num(values, nan=np.inf))
        if hit.sum() >= chains or len(levels) >= 60:
            p = float(hit.mean())
            threshold, seeds_next = 0.0, None
        else:
            threshold = float((ranked[chains - 1] + ranked[chains]) / 2)
            p, seeds_next = chains / n, order[:chains]
        indicator = np.nan_to_num(values, nan=np.inf) <= threshold if seeds_next is not None \
            else hit
        gamma = 0.0 if states_by_chain is None else correlation_factor(
            indicator[states_by_chain], p)
        deltas.append((1 - p) / (n * p) * (1 + gamma) if p > 0 else np.inf)
        if p > 0:
            deviation += np.bincount(roots, (indicator - p) / (n * p), minlength=n)
        product *= p
        level_cov = spread(deltas, deviation)
        convergence.append({"runs": evaluated[0], "pf": product, "cov": level_cov,
                            "threshold": threshold})
        if seeds_next is None:
            converged = p > 0
            pf = product if p > 0 else None
            break
        if evaluated[0] + n - chains > max_runs:  # a level evaluates at most n - chains runs
            break
        levels.append(threshold)
        u, values = markov_chains(counted, u[seeds_next], values[seeds_next], threshold, length,
                                  rng)
        roots = np.repeat(roots[seeds_next], length)
        states_by_chain = np.arange(n).reshape(chains, length)
    cov = level_cov if converged else None
    ci = None
    if pf is not None and cov is not None:
        half = Z95 * cov * pf
        ci = [max(pf - half, 0.0), pf + half]
    runs = evaluated[0]
    result = estimate(pf, cov, ci, runs, "subset", converged, convergence)
    result["levels"] = len(levels)
    if not converged:
        bound = product
        result.update(pf=None, beta=None, pf_below=bound, beta_above=beta_of(bound))
        result["warnings"] = [
            f"the levels did not reach the failure domain in {runs:,} runs ({len(levels)} "
            f"levels): pf is below about {bound:.3g}; raise max_runs"]
    return result


def markov_chains(g: GFunction, seeds: np.ndarray, seed_values: np.ndarray, threshold: float,
                  length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`length` states of a chain from each seed (the seed first), every state in g <= threshold,
    by adaptive conditional sampling (Papaioannou et al. 2015): the candidate
    rho u + sqrt(1 - rho^2) xi leaves the standard normal unchanged, so it is kept wherever
    g stays within the threshold; its spread sigma = min(lambda s_k, 1) (s_k the seeds' standard
    deviation) follows the acceptance rate towards 0.44, step by step. All chains step together
    (one batch)."""
    chains, d = seeds.shape
    states = np.empty((chains, length, d))
    values = np.empty((chains, length))
    states[:, 0], values[:, 0] = seeds, seed_values
    current, now = seeds.copy(), seed_values.copy()
    spread = np.minimum(seeds.std(axis=0, ddof=1), 1.0) if chains > 1 else np.ones(d)
    scale = LAMBDA
    for step in range(1, length):
        sigma = np.minimum(scale * spread, 1.0)
        candidate = np.sqrt(1 - sigma ** 2) * current + sigma * rng.standard_normal((chains, d))
        found = g(candidate)
        accept = ~np.isnan(found) & (found <= threshold)
        current = np.where(accept[:, None], candidate, current)
        now = np.where(accept, found, now)
        states[:, step], values[:, step] = current, now
        scale *= float(np.exp((accept.mean() - ACCEPTANCE) / np.sqrt(step)))
    return states.reshape(chains * length, d), values.reshape(chains * length)


def spread(deltas: list[float], deviation: np.ndarray) -> float:
    """Subset's cov: the spread of log pf over the level-0 ancestors, which counts the levels'
    shared seeds that Au and Beck's sqrt(sum delta_i^2) leaves out (Lee and Whiteley 2018), or
    Au and Beck's where larger: where few ancestors are left, the spread is too low."""
    if not np.isfinite(deltas[-1]):
        return float("inf")
    return float(np.sqrt(max(sum(deltas), float(deviation @ deviation))))


def correlation_factor(indicator: np.ndarray, p: float) -> float:
    """Au and Beck's gamma: the correlation of the chains' indicator states, which widens a
    level's cov from sqrt((1 - p) / (N p)) to sqrt((1 - p) / (N p) (1 + gamma))."""
    chains, length = indicator.shape
    n = chains * length
    variance = p * (1 - p)
    if variance <= 0:
        return 0.0
    ind = indicator.astype(float)
    gamma = 0.0
    for k in range(1, length):
        r = (ind[:, :-k] * ind[:, k:]).sum() / (n - k * chains) - p * p
        gamma += 2 * (1 - k * chains / n) * r / variance
    return float(max(gamma, 0.0))


def checked(found: dict[str, Any], g: GFunction, fails: Fails, centres: np.ndarray,
            seed: np.random.SeedSequence, runs: int) -> dict[str, Any]:
    """FORM's or SORM's results with an importance-sampling check: `runs` draws from the
    equal mixture of N(c, I) over the design points c, weighted phi(u) / q(u); where FORM's pf
    lies outside the check's 99.7% interval (3 sd) and 10% away from it, a warning."""
    from scipy.special import logsumexp

    k = len(centres)
    u = centres[np.arange(runs) % k] + stream(seed, 5).standard_normal((runs, centres.shape[1]))
    values = g(u)
    ok = ~np.isnan(values)
    log_q = logsumexp(-((u[:, None, :] - centres[None]) ** 2).sum(axis=2) / 2, axis=1) - np.log(k)
    terms = np.where(fails(np.nan_to_num(values, nan=np.inf)),
                     np.exp(-(u * u).sum(axis=1) / 2 - log_q), 0.0)[ok]
    if len(terms) < 2:
        return found
    pf = float(terms.mean())
    sd = float(terms.std(ddof=1) / np.sqrt(len(terms)))
    found["check"] = {"runs": runs, "pf": pf, "cov": sd / pf if pf > 0 else None,
                      "ci": [max(pf - Z95 * sd, 0.0), pf + Z95 * sd], "design_points": k}
    claimed = found.get("pf")
    if claimed is not None and abs(claimed - pf) > max(3 * sd, 0.1 * pf):
        where = "the design point" if k == 1 else f"the {k} design points"
        found.setdefault("warnings", []).append(
            f"a check by {runs} importance-sampling runs around {where} gives pf = {pf:.3g} "
            f"(95% interval {max(pf - Z95 * sd, 0.0):.3g} to {pf + Z95 * sd:.3g}), not "
            f"{found['method']}'s {claimed:.3g}: the limit state is not close to "
            f"{'flat' if found['method'] == 'form' else 'a quadric'} there, or it fails in "
            "places the design points miss; use importance, subset or ak-mcs")
    return found
