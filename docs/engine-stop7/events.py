"""advise request-service --max-throttled 5% in-process (one worker): simulated events,
engine seconds and stopped runs, with Run.stop and with it ignored."""
import json, sys
import throttlelab
from throttlelab import runner as R
import throttlelab.advise
A = sys.modules["throttlelab.advise"]
real = R.simulate
use_stop = [True]
tally = {}
def sim(text, overrides=(), like_host=None, placed=False, stop=None):
    out = real(text, overrides, like_host, placed, stop if use_stop[0] else None)
    tally["runs"] = tally.get("runs", 0) + 1
    tally["events"] = tally.get("events", 0) + out["engine"]["events"]
    tally["engine_s"] = round(tally.get("engine_s", 0) + out["engine"]["wall_s"], 4)
    tally["stopped"] = tally.get("stopped", 0) + ("stopped" in out)
    return out
R.simulate = sim
text = throttlelab.scenario_text("request-service")
answers = []
for use in (True, False):
    use_stop[0] = use
    tally.clear()
    answers.append(json.dumps(A.advise_text(text, "app", 0.05, workers=1)))
    print("stop" if use else "no stop", tally)
print("answers identical:", answers[0] == answers[1])
