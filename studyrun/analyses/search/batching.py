"""Batching the model evaluations of iterative fits, so they run in parallel on the executor.

`Evaluations` remembers what every parameter row gave, so no row is sent twice, and sends the
rows it lacks in one `evaluate` call (one round trip to the executor and the run store).
`lockstep` runs several sequential fits (multistart) in threads; whenever every live fit waits
for rows, their requests go out together as one batch. The fits only compute: every `evaluate`
call happens in the calling thread (the run store's SQLite connection belongs to it). A fit's
numbers do not depend on which other fits share its batches, so results stay deterministic.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from studyrun.core.design import Evaluate, Outcome

Summarise = Callable[[Outcome], dict[str, np.ndarray]]  # outcome -> arrays with one row per run
Ask = Callable[[np.ndarray], dict[str, np.ndarray]]


class Evaluations:
    """Model evaluations through `evaluate`, summarised per row and remembered by row."""

    def __init__(self, evaluate: Evaluate, summarise: Summarise) -> None:
        self.evaluate, self.summarise = evaluate, summarise
        self.memory: dict[bytes, dict[str, np.ndarray]] = {}
        self.runs = 0  # distinct rows sent to the executor
        self.calls = 0  # round trips
        self.first: Outcome | None = None

    def __call__(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The summaries of `rows` (k, m), stacked; unknown rows evaluated in one call."""
        rows = np.atleast_2d(np.asarray(rows, dtype=float))
        keys = [row.tobytes() for row in rows]
        missing = list(dict.fromkeys(k for k in keys if k not in self.memory))
        if missing:
            matrix = np.array([np.frombuffer(k) for k in missing]).reshape(len(missing), rows.shape[1])
            outcome = self.evaluate(matrix)
            self.first = self.first or outcome
            self.runs += len(missing)
            self.calls += 1
            summary = self.summarise(outcome)
            for i, key in enumerate(missing):
                self.memory[key] = {name: values[i] for name, values in summary.items()}
        return {name: np.array([self.memory[k][name] for k in keys]) for name in self.memory[keys[0]]}


def lockstep(fits: list[Callable[[Ask], Any]], evaluations: Evaluations) -> list[Any]:
    """Run each fit(ask) in its own thread, batching their concurrent asks; return their results
    in order. An exception in a fit or in an evaluation is raised here after every fit stopped."""
    if len(fits) == 1:
        return [fits[0](evaluations)]
    cond = threading.Condition()
    requests: dict[int, np.ndarray] = {}
    answers: dict[int, Any] = {}
    results: list[Any] = [None] * len(fits)
    errors: list[BaseException] = []
    live = [len(fits)]

    def make_ask(i: int) -> Ask:
        def ask(rows: np.ndarray) -> dict[str, np.ndarray]:
            with cond:
                requests[i] = np.atleast_2d(np.asarray(rows, float))
                cond.notify_all()
                cond.wait_for(lambda: i in answers)
                answer = answers.pop(i)
            if isinstance(answer, BaseException):
                raise _Stopped from answer
            return answer
        return ask

    def run(i: int) -> None:
        try:
            results[i] = fits[i](make_ask(i))
        except _Stopped:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the calling thread
            with cond:
                errors.append(error)
        finally:
            with cond:
                live[0] -= 1
                cond.notify_all()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(fits))]
    for thread in threads:
        thread.start()
    while True:
        with cond:
            cond.wait_for(lambda: live[0] == 0 or len(requests) == live[0])
            if live[0] == 0:
                break
            batch = dict(sorted(requests.items()))
            requests.clear()
        try:
            summary = evaluations(np.vstack(list(batch.values())))
            start, replies = 0, {}
            for i, rows in batch.items():
                replies[i] = {k: v[start:start + len(rows)] for k, v in summary.items()}
                start += len(rows)
        except BaseException as error:  # noqa: BLE001 - stop every fit, then raise
            errors.append(error)
            replies = {i: error for i in batch}
        with cond:
            answers.update(replies)
            cond.notify_all()
        if errors:
            with cond:  # stop the fits still asking
                while live[0]:
                    for i in list(requests):
                        answers[i] = errors[0]
                    requests.clear()
                    cond.notify_all()
                    cond.wait(0.05)
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


class _Stopped(Exception):
    """A fit's evaluation failed elsewhere; the fit stops quietly."""
