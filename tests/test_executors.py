"""The four executors behind one `Executor` protocol, each giving back a batch's outcome as a
`BatchResult` (a real thread pool, child process and in-process Dask cluster)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from conftest import write_study

from studyrun.commands.pipeline import make_job
from studyrun.core.isolated import IsolatedExecutor
from studyrun.execution.execute import BatchResult, run_batch
from studyrun.execution.executors import DaskExecutor, Executor, SyncExecutor, ThreadExecutor
from studyrun.study.loading import load_study

STUDY = """
name: batch
model: {type: python, function: "linear:linear", vectorized: true}
parameters:
  a: {bounds: [0, 1]}
  b: {bounds: [0, 1]}
analysis: {type: montecarlo, samples: 4}
"""


def dask_executor() -> DaskExecutor:
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                           dashboard_address=":0")
    return DaskExecutor(Client(cluster), cluster, "local")


EXECUTORS = {"sync": SyncExecutor, "threads": lambda: ThreadExecutor(2),
             "process": IsolatedExecutor, "local": dask_executor}


@pytest.mark.slow
@pytest.mark.parametrize("kind", EXECUTORS)
def test_every_executor_runs_a_batch_into_a_batch_result(study_dir, kind):
    job = make_job(load_study(write_study(study_dir, STUDY)), study_dir / "out")
    inputs = {"a": np.array([0.5, 1.0]), "b": np.array([0.0, 1.0])}
    executor = EXECUTORS[kind]()
    try:
        assert isinstance(executor, Executor) and executor.workers >= 1
        future = executor.submit(run_batch, job, inputs, np.array([7, 8], np.int64))
        done, pending = executor.wait_first({future})
        result = executor.result(future)
    finally:
        executor.close()
    assert done == {future} and not pending
    assert isinstance(result, BatchResult)
    assert result.ids.tolist() == [7, 8] and result.errors == [None, None]
    assert result.values["y"].tolist() == [1.0, -1.0]  # y = 2a - 3b
    assert pickle.loads(pickle.dumps(result)).values["y"].tolist() == [1.0, -1.0]


def test_a_ctrl_c_before_a_client_call_started_leaves_no_traceback():
    """distributed's sync(), interrupted before its coroutine started, logs its cancel callback's
    NameError through tornado (seen at a terminal's Ctrl-C): the executor's filter drops that
    record, and no other."""
    import logging
    import os
    import signal
    import threading

    from distributed.utils import sync
    from tornado.ioloop import IOLoop

    from studyrun.execution.executors import not_a_cancel_of_an_unstarted_call

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("tornado.application")
    logger.addHandler(handler)
    loop = IOLoop(make_current=False)  # not running yet: sync()'s coroutine waits
    ctrl_c = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            sync(loop, lambda: None)
        loop.run_sync(lambda: None)  # runs the coroutine's first step, then cancel
    finally:
        signal.signal(signal.SIGINT, ctrl_c)
        logger.removeHandler(handler)
        loop.close()
    assert [type(r.exc_info[1]) for r in records if r.exc_info] == [NameError], (
        "distributed no longer logs this NameError: the filter may go")
    assert not not_a_cancel_of_an_unstarted_call(records[0])
    try:
        raise NameError("another")
    except NameError as error:
        other = logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "x", None,
                                  (NameError, error, error.__traceback__))
    assert not_a_cancel_of_an_unstarted_call(other)
