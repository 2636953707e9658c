"""The variants of #34's three edge cases (docs/fidelity.md, "Three cases the
issue names"): name -> (scenario, overrides). Demand / quota is given in each
name's comment; every variant is 2 CPUs, HZ=250, profile 6.18."""

T = "docs/edge-cases/timer.toml"      # 2 x (6 ms run, 16 ms relative timer): 0.75 CPU
R = "docs/rt-app/periodic.json"       # 4 x rt-app's periodic: 1.5 CPU
N = "docs/edge-cases/nested.toml"     # pod and app both limited, 2 x 10/18.6 ms: 0.70 CPU
S = "docs/edge-cases/service.toml"    # Poisson 40/s x 5 ms, 4 workers: 0.2 CPU


def cg(name, period_us, quota_us, burst_us=0):
    return [f"cgroup.{name}.period_us={period_us}", f"cgroup.{name}.quota_us={quota_us}", f"cgroup.{name}.burst_us={burst_us}"]


VARIANTS = {
    # (a) timer threads, burst of the quota unless "-b0"
    "timer-2t-p20": (T, cg("app", 20000, 15000, 15000)),                     # 1.0
    "timer-2t-p50": (T, cg("app", 50000, 37500, 37500)),                     # 1.0
    "timer-2t-p100": (T, cg("app", 100000, 75000, 75000)),                   # 1.0
    "timer-2t-p50-b0": (T, cg("app", 50000, 37500, 0)),                      # 1.0
    "timer-4t-p50": (T, [*cg("app", 50000, 75000, 75000), "task.tick.threads=4"]),  # 1.0
    "rtapp-p16": (R, cg("app", 16000, 20000, 20000)),                        # 1.2
    # (b) a child at its parent's limit (both limited alike unless "parent")
    "nested-p100": (N, []),                                                  # 1.0
    "nested-p50": (N, [*cg("pod", 50000, 35000), *cg("app", 50000, 35000)]),  # 1.0
    "nested-p20": (N, [*cg("pod", 20000, 14000), *cg("app", 20000, 14000)]),  # 1.0
    "nested-p50-r1.1": (N, [*cg("pod", 50000, 31800), *cg("app", 50000, 31800)]),  # 1.1
    "nested-parent-p50": (N, [*cg("pod", 50000, 35000), "cgroup.app.quota_us=-1"]),  # 1.0, the child unlimited
    # (c) a lightly loaded open-loop request server
    "service-p100": (S, []),                                                 # 1.0
    "service-p50": (S, cg("app", 50000, 10000)),                             # 1.0
    "service-p20": (S, cg("app", 20000, 4000)),                              # 1.0
    "service-p100-b": (S, cg("app", 100000, 20000, 20000)),                  # 1.0
}

CASES = {"timer": ("timer-", "rtapp-"), "nested": ("nested-",), "service": ("service-",)}
