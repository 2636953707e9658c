"""issue 36 / repro10. The parent's part of reproduce --all before the pool: every run's scenario text and
overrides, each validated (runner.completed_runs). argv[1]: 'loop' to validate, else imports only."""
import sys
from throttlelab import reproduce
from throttlelab.runner import document, Run
from throttlelab.scenarios import load_scenario_text
runs = []
for experiment in reproduce.EXPERIMENTS.values():
    for case in experiment.cases:
        text, _ = load_scenario_text(case.scenario or experiment.scenario)
        runs += [(text, sets) for per_seed in experiment.runs(case) for sets in per_seed]
if sys.argv[1:] == ["loop"]:
    for run in (Run(*r) for r in runs):
        document(run.text).validate(list(run.overrides), run.stop)
print(len(runs))
