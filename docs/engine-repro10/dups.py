"""issue 36 / repro10. Runs of reproduce --all whose loaded scenarios are identical (the validate JSON), per experiment."""
import collections, hashlib
from throttlelab import reproduce
from throttlelab.runner import document
from throttlelab.scenarios import load_scenario_text
seen = {}
for experiment in reproduce.EXPERIMENTS.values():
    keys = []
    for case in experiment.cases:
        text, _ = load_scenario_text(case.scenario or experiment.scenario)
        for per_seed in experiment.runs(case):
            for sets in per_seed:
                j = document(text).validate(list(sets))
                keys.append(hashlib.sha256(j.encode()).hexdigest())
    c = collections.Counter(keys)
    cross = sum(1 for k in c if k in seen)
    for k in c: seen.setdefault(k, experiment.name)
    print(f"{experiment.name}: {len(keys)} runs, {len(c)} distinct scenarios, {cross} also in an earlier experiment")
