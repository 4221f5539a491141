"""One command that regenerates the paper's tables and figures: notebooks 01-06 under papermill, then 07
(the judge report card and the user-agent audit on a small design) and, in the generated pass, notebook
08 (PERSONA Bench offline on synthetic data).

`python -m personalens_utils.reproduce --run NAME` (what `make reproduce` calls) runs the notebooks
in pipeline order from one parameter set, once per benchmark "pass": a small benchmark generated
on the spot, and the official data when the kit finds it. Executed notebooks, run stores, tables
and figures of a pass go to `runs/<run>/<pass>/`; when every notebook of the main pass finished, its
tables and figures are copied to the top-level `tables/` and `figures/`, and `runs/LATEST` names
that pass, so the notebooks on their default parameters work on its benchmark and run store.
`runs/<run>/INDEX.md` lists every table and figure of the paper with the file this run wrote for
it, or the reason it was not reproduced.

- `cli`: the options, checked before any notebook starts, and `main`;
- `settings`: the one parameter set (`Settings`) and the roles' models;
- `pipeline`: the notebooks of a pass, what each needs, and publishing;
- `notebooks`: one notebook under papermill and the files it wrote;
- `index`: INDEX.md.
"""

from personalens_utils.reproduce.cli import OptionError, main, parse_args, problems
from personalens_utils.reproduce.index import PAPER_ITEMS, write_index
from personalens_utils.reproduce.notebooks import PassResult, StepResult, run_notebook
from personalens_utils.reproduce.pipeline import publish, reproduce, run_pass
from personalens_utils.reproduce.settings import (
    ANTHROPIC_ASSISTANTS,
    OFFLINE_ASSISTANTS,
    Settings,
    model_name,
    role_specs,
)

__all__ = ["ANTHROPIC_ASSISTANTS", "OFFLINE_ASSISTANTS", "PAPER_ITEMS", "OptionError",
           "PassResult", "Settings", "StepResult", "main", "model_name", "parse_args", "problems", "publish",
           "reproduce", "role_specs", "run_notebook", "run_pass", "write_index"]
