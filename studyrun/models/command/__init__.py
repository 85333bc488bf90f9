"""The `command` model: an external program run once per run in a private working directory.

Execute step. For each run the evaluator makes `run-<id as 16 hex digits>/` under the batch's
workdir, writes the run's parameter values there (JSON, YAML, or a text template), runs the argv
list with `shell=False` (placeholders are filled element by element, so no value ever reaches a
shell), and reads the results file back. Every way a run can go wrong (exit status, signal,
timeout, missing or malformed results, program not found) is recorded on that run, never raised.

Conventions (what a Dakota or EasyVVUQ user would expect, made explicit; for users in
docs/reference/command.md):

- Fields in `run` and in a template (placeholders.py): `{name}` or `{name:spec}` (a Python
  format spec), `name` a parameter or one of `{params_file}`, `{results_file}` (absolute paths
  in the run's workdir), `{workdir}`, `{study_dir}` (absolute) and `{run_id}` (the 16 hex digits
  of the workdir name); `{{name}}` is the text `{name}`; any other brace is text. Programs run
  with the run's workdir as current directory, so refer to files of the study as
  `"{study_dir}/sim.py"`. A relative program path (`bin/sim`) is resolved against the study
  folder; a bare name is looked up on PATH, then in the study folder.
- Values: a parameter the study gives as whole numbers (`with_whole_numbers`: an integer
  constant, `values:` or a sweep's `levels:` of integers) is written as an int (`10`), in a
  template and in a JSON or YAML params file alike; a real as its repr (`0.1`, `10.0`), which
  reads back bit for bit. At validate (`Command.check_inputs`), every field names a parameter or
  a placeholder with a spec that fits its value, and a varied parameter is written somewhere.
- Results, `.json`: one object; a number (or null for NaN, true/false for 1/0) is a scalar
  output, a list of numbers is a series on the optional `"time"` list (else on 0, 1, 2, ...).
  Results, `.csv`: a header with a `time` column and one column per series; empty cells are NaN.
  Results with `columns:` (any name but .json): a table without a header, numbers separated by
  spaces, tabs or commas; series over its `time` column, or one row of scalars without one.
  A run that lacks an output other runs of the batch have fails (write null instead).
- Each run's series stay on its own `time` (a simulation may stop on an event), and its
  quantities are computed on them; analyses that need one grid interpolate (studyrun/plan/grids.py).
- `{seed}` in `run` or in a template is the run's seed, 0 <= seed < 2**31, derived from its
  identity (studyrun.core.seeds): the same in any batch and after a resume; the study's `seed`
  is then part of every run's identity.
- `keep_workdirs`: `failed` (default) removes the workdirs of successful runs; `all` keeps
  every one; `none` removes every one. stdout.txt and stderr.txt are written in each workdir.
- `memory_limit` (`512MB`, `2GiB`, or bytes; KB/MB/GB are powers of 1000 and KiB/MiB/GiB of
  1024, as in Dask) caps the address space with RLIMIT_AS (POSIX; not enforced on macOS).
- `max_output` (default `100MB`, same units) caps the size of a run's results file: a larger
  file fails that run unread, so a runaway program cannot fill the driver's memory.
"""

from studyrun.core.sizes import MAX_BYTES, parse_bytes
from studyrun.models.command.evaluator import CommandEvaluator
from studyrun.models.command.placeholders import PLACEHOLDERS
from studyrun.models.command.spec import Command, ParamsFile, Template

__all__ = [
    "MAX_BYTES", "PLACEHOLDERS", "Command", "CommandEvaluator", "ParamsFile", "Template",
    "parse_bytes",
]
