"""Sobol' of Ishigami with EasyVVUQ: MCSampler (Saltelli plan, N (D + 2) runs) and QMCAnalysis.

    benchmarks/out/peers-venv/bin/python benchmarks/peers/easyvvuq_ishigami.py --action python|local
        [--program "PROGRAM ARGS"]

`python`: a campaign whose action is ExecutePython (the function called in-process per run).
`local`: EasyVVUQ's file-based workflow, per run: CreateRunDirectory, Encode (a JSON input from
a template), ExecuteLocal (`PROGRAM input.json output.json` as a subprocess; by default the
Python script ishigami_app.py), Decode (a JSON output).
Runs sequentially (campaign.execute(sequential=True)). Prints runs=, import=, work=, per_run=
and cpu= (CPU seconds of this process and its programs during work=).
"""

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

t0 = time.perf_counter()
import chaospy as cp  # noqa: E402
import easyvvuq as uq  # noqa: E402
from easyvvuq.actions import (  # noqa: E402
    Actions,
    CreateRunDirectory,
    Decode,
    Encode,
    ExecuteLocal,
    ExecutePython,
)

T_IMPORT = time.perf_counter() - t0
HERE = Path(__file__).resolve().parent


def ishigami(params):
    x1, x2, x3 = params["x1"], params["x2"], params["x3"]
    return {"y": math.sin(x1) + 7.0 * math.sin(x2) ** 2 + 0.1 * x3**4 * math.sin(x1)}


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--action", choices=("python", "local"), default="python")
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--where", default=str(HERE.parent / "out"),
                        help="parent of the campaign's folder")
    parser.add_argument("--program", default=f"{sys.executable} {HERE / 'ishigami_app.py'}",
                        help="the command ExecuteLocal runs, before the input and output files")
    args = parser.parse_args()
    work_dir = Path(tempfile.mkdtemp(prefix="easyvvuq-", dir=args.where))
    params = {f"x{i}": {"type": "float", "min": -math.pi, "max": math.pi, "default": 0.0}
              for i in (1, 2, 3)}
    vary = {f"x{i}": cp.Uniform(-math.pi, math.pi) for i in (1, 2, 3)}
    start, cpu = time.perf_counter(), cpu_seconds()
    if args.action == "python":
        actions = Actions(ExecutePython(ishigami))
    else:
        template = work_dir / "input.template"
        template.write_text('{"x1": $x1, "x2": $x2, "x3": $x3}\n')
        actions = Actions(
            CreateRunDirectory(str(work_dir / "runs"), flatten=True),
            Encode(uq.encoders.GenericEncoder(str(template), target_filename="input.json")),
            ExecuteLocal(f"{args.program} input.json output.json"),
            Decode(uq.decoders.JSONDecoder("output.json", ["y"])))
    campaign = uq.Campaign(name="ishigami", params=params, actions=actions, work_dir=str(work_dir))
    sampler = uq.sampling.MCSampler(vary, n_mc_samples=args.samples)
    campaign.set_sampler(sampler)
    campaign.execute(sequential=True).collate()
    results = campaign.analyse(qoi_cols=["y"])
    work, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    runs = len(campaign.get_collation_result())
    shutil.rmtree(work_dir)
    s1 = results.sobols_first("y")["x1"]
    print(f"runs={runs} import={T_IMPORT:.4f} work={work:.4f} per_run={work / runs:.3e} "
          f"cpu={cpu:.4f} S1_x1={float(s1[0] if hasattr(s1, '__len__') else s1):.4f}")


if __name__ == "__main__":
    main()
