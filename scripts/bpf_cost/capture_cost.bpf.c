// What a BPF capture would cost the captured workload (docs/capture.md,
// "Filtering in the kernel"): programs on the scheduler's BTF tracepoints
// (tp_btf: called directly from the tracepoint, no ftrace ring buffer), in
// four variants that the loader (bpf_cost.c) picks one of:
//   empty:  the programs return at once (the floor: a BPF call per event);
//   eswitch: the same on sched_switch alone;
//   filter: they test whether the event's task is in the target cgroup;
//   ring:   the filter, then one 32-byte record per kept event into a BPF
//           ring buffer (64 MiB) the loader drains every 50 ms (what a capture needs:
//           a switch's prev/next, a waking's waker and wakee, fork, exit;
//           the burst's runtime read from the task, so no sched_stat_runtime);
//   agg:    the filter, then per-thread sums in a hash map (no record per event).
// The cgroup is v1's cpu hierarchy's or v2's (the loader says which through
// `subsys`: the cpu controller's id, or -1 for v2's default hierarchy).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

const volatile u64 target_cgid = 0;
const volatile int subsys = -1;

enum { SWITCH = 1, WAKING = 2, FORK = 3, EXIT = 4 };

struct rec {
	u64 ts_ns;
	u32 kind;
	u32 pid;
	u32 pid2;
	u32 cpu;
	u64 runtime_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20); // the capture's bound on kernel trace memory
} rb SEC(".maps");

// 0: events seen, 1: kept, 2: not written (ring buffer full).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, u32);
	__type(value, u64);
} counts SEC(".maps");

struct sums {
	u64 switches_out;
	u64 last_runtime_ns;
	u64 run_ns;
	u64 wakings;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct sums);
} threads SEC(".maps");

static __always_inline void count(u32 i)
{
	u64 *n = bpf_map_lookup_elem(&counts, &i);
	if (n)
		*n += 1;
}

static __always_inline u64 cgroup_of(struct task_struct *t)
{
	if (subsys < 0)
		return t->cgroups->dfl_cgrp->kn->id;
	return t->cgroups->subsys[cpu_cgrp_id]->cgroup->kn->id;
}

static __always_inline bool traced(struct task_struct *t)
{
	return cgroup_of(t) == target_cgid;
}

static __always_inline void emit(u32 kind, u32 pid, u32 pid2, u64 runtime_ns)
{
	struct rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r) {
		count(2);
		return;
	}
	r->ts_ns = bpf_ktime_get_ns();
	r->kind = kind;
	r->pid = pid;
	r->pid2 = pid2;
	r->cpu = bpf_get_smp_processor_id();
	r->runtime_ns = runtime_ns;
	// No wake-up per record: the loader reads on a timer.
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

static __always_inline void add(u32 pid, u64 runtime_ns, bool out)
{
	struct sums *s = bpf_map_lookup_elem(&threads, &pid);
	if (!s) {
		struct sums zero = {};
		bpf_map_update_elem(&threads, &pid, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&threads, &pid);
		if (!s)
			return;
	}
	if (out) {
		s->switches_out++;
		s->run_ns += runtime_ns - s->last_runtime_ns;
	} else {
		s->wakings++;
	}
	s->last_runtime_ns = runtime_ns;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(empty_switch, bool preempt, struct task_struct *prev, struct task_struct *next) { return 0; }
SEC("tp_btf/sched_waking")
int BPF_PROG(empty_waking, struct task_struct *p) { return 0; }
SEC("tp_btf/sched_process_fork")
int BPF_PROG(empty_fork, struct task_struct *parent, struct task_struct *child) { return 0; }
SEC("tp_btf/sched_process_exit")
int BPF_PROG(empty_exit, struct task_struct *p) { return 0; }

SEC("tp_btf/sched_switch")
int BPF_PROG(eswitch_switch, bool preempt, struct task_struct *prev, struct task_struct *next) { return 0; }

SEC("tp_btf/sched_switch")
int BPF_PROG(filter_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	count(0);
	if (traced(prev) || traced(next))
		count(1);
	return 0;
}
SEC("tp_btf/sched_waking")
int BPF_PROG(filter_waking, struct task_struct *p)
{
	count(0);
	if (traced(p))
		count(1);
	return 0;
}
SEC("tp_btf/sched_process_fork")
int BPF_PROG(filter_fork, struct task_struct *parent, struct task_struct *child)
{
	count(0);
	if (traced(parent))
		count(1);
	return 0;
}
SEC("tp_btf/sched_process_exit")
int BPF_PROG(filter_exit, struct task_struct *p)
{
	count(0);
	if (traced(p))
		count(1);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ring_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	count(0);
	if (!traced(prev) && !traced(next))
		return 0;
	count(1);
	emit(SWITCH, prev->pid, next->pid, prev->se.sum_exec_runtime);
	return 0;
}
SEC("tp_btf/sched_waking")
int BPF_PROG(ring_waking, struct task_struct *p)
{
	count(0);
	if (!traced(p))
		return 0;
	count(1);
	emit(WAKING, bpf_get_current_pid_tgid() & 0xffffffff, p->pid, 0);
	return 0;
}
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ring_fork, struct task_struct *parent, struct task_struct *child)
{
	count(0);
	if (!traced(parent))
		return 0;
	count(1);
	emit(FORK, parent->pid, child->pid, 0);
	return 0;
}
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ring_exit, struct task_struct *p)
{
	count(0);
	if (!traced(p))
		return 0;
	count(1);
	emit(EXIT, p->pid, 0, p->se.sum_exec_runtime);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(agg_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	count(0);
	if (!traced(prev))
		return 0;
	count(1);
	add(prev->pid, prev->se.sum_exec_runtime, true);
	return 0;
}
SEC("tp_btf/sched_waking")
int BPF_PROG(agg_waking, struct task_struct *p)
{
	count(0);
	if (!traced(p))
		return 0;
	count(1);
	add(p->pid, p->se.sum_exec_runtime, false);
	return 0;
}
SEC("tp_btf/sched_process_fork")
int BPF_PROG(agg_fork, struct task_struct *parent, struct task_struct *child) { return 0; }
SEC("tp_btf/sched_process_exit")
int BPF_PROG(agg_exit, struct task_struct *p) { return 0; }
