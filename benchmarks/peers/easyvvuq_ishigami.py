"""Sobol' of Ishigami with EasyVVUQ: MCSampler (Saltelli plan, N (D + 2) runs) and QMCAnalysis.

    benchmarks/out/peers-venv/bin/python benchmarks/peers/easyvvuq_ishigami.py --action python|local

`python`: a campaign whose action is ExecutePython (the function called in-process per run).
`local`: EasyVVUQ's file-based workflow, per run: CreateRunDirectory, Encode (a JSON input from
a template), ExecuteLocal (a Python script as a subprocess), Decode (a JSON output).
Runs sequentially (campaign.execute(sequential=True)). Prints runs=, import=, work=, per_run=.
"""

import argparse
import math
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--action", choices=("python", "local"), default="python")
    parser.add_argument("--samples", type=int, default=1024)
    args = parser.parse_args()
    work_dir = Path(tempfile.mkdtemp(prefix="easyvvuq-", dir=HERE.parent / "out"))
    params = {f"x{i}": {"type": "float", "min": -math.pi, "max": math.pi, "default": 0.0}
              for i in (1, 2, 3)}
    vary = {f"x{i}": cp.Uniform(-math.pi, math.pi) for i in (1, 2, 3)}
    start = time.perf_counter()
    if args.action == "python":
        actions = Actions(ExecutePython(ishigami))
    else:
        template = work_dir / "input.template"
        template.write_text('{"x1": $x1, "x2": $x2, "x3": $x3}\n')
        actions = Actions(
            CreateRunDirectory(str(work_dir / "runs"), flatten=True),
            Encode(uq.encoders.GenericEncoder(str(template), target_filename="input.json")),
            ExecuteLocal(f"{sys.executable} {HERE / 'ishigami_app.py'} input.json output.json"),
            Decode(uq.decoders.JSONDecoder("output.json", ["y"])))
    campaign = uq.Campaign(name="ishigami", params=params, actions=actions, work_dir=str(work_dir))
    sampler = uq.sampling.MCSampler(vary, n_mc_samples=args.samples)
    campaign.set_sampler(sampler)
    campaign.execute(sequential=True).collate()
    results = campaign.analyse(qoi_cols=["y"])
    work = time.perf_counter() - start
    runs = len(campaign.get_collation_result())
    s1 = results.sobols_first("y")["x1"]
    print(f"runs={runs} import={T_IMPORT:.4f} work={work:.4f} per_run={work / runs:.3e} "
          f"S1_x1={float(s1[0] if hasattr(s1, '__len__') else s1):.4f}")


if __name__ == "__main__":
    main()
