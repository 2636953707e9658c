//! The deadline class (`kernel/sched/deadline.c`): per-thread constant
//! bandwidth servers (CBS), global EDF across all CPUs, and admission control.
//!
//! Modelled: `sched_setattr` admission (`__dl_overflow`: the sum of
//! runtime/period of admitted threads stays within 95 % of the CPUs, less the
//! fair servers' 5 % from 6.12); the CBS
//! wake-up rule (`update_dl_entity`); runtime enforcement (`update_curr_dl`
//! throttles a thread out of runtime until its replenishment timer,
//! `replenish_dl_entity`); global EDF: the runnable deadline threads with the
//! earliest absolute deadlines run, one per CPU, ahead of every fair thread.
//!
//! What keeps fair tasks alive is admission: deadline threads reserve at most
//! 95 % (90 % from 6.12) of the CPUs, and the fair class gets the rest. RT
//! throttling never throttles deadline threads (their time only counts
//! against RT tasks, which the simulator has none of), so before 6.12 it
//! changes nothing here. The fair server's run-time part (from 6.12 it runs
//! starved fair tasks for 50 ms a second, deferred to zero laxity) is not
//! modelled: with deadline threads held to 90 %, fair tasks get their 50 ms
//! each second before the server would act, except on a CPU that global EDF
//! keeps busy for over 950 ms of a second.
//!
//! Approximation (docs/engine.md): runtime is enforced at the exact instant
//! (as with HRTICK) rather than at the next tick.

use crate::engine::event::{Event, Queue};
use crate::vocab::dl::{dl_runtime_at_rate, to_ratio};
use crate::engine::rq::ThreadState;
use crate::engine::sim::Sim;
use crate::vocab::types::{CpuId, ThreadId, Time};

/// A thread's SCHED_DEADLINE state: `struct sched_dl_entity`.
#[derive(Debug, Clone)]
pub struct DlEntity {
    /// The task's own relative deadline and period; `dl_*` may differ while a
    /// trace task profiles a window.
    pub task_deadline: u64,
    pub task_period: u64,
    /// 004 3.3's profiling stage at each trace window, if the task has one.
    pub profile_ns: Option<u64>,
    /// The window this thread is in: profiling events of older ones are stale.
    pub window_gen: u64,
    /// Profiling: the thread's CPU time when the stage began.
    pub profile_cpu_ns: Option<u64>,
    pub dl_runtime: u64,
    pub dl_deadline: u64,
    pub dl_period: u64,
    /// runtime/period, fixed point.
    pub dl_bw: u64,
    /// Runtime left in the current instance; negative after an overrun.
    pub runtime: i64,
    /// Absolute deadline of the current instance.
    pub deadline: Time,
    /// Out of runtime, waiting for the replenishment timer.
    pub throttled: bool,
    /// Admission control let it in; until then it runs as a fair thread.
    pub admitted: bool,
    pub retry_ns: u64,
    /// Jobs (run phases) completed after their absolute deadline.
    pub misses: u64,
    pub refusals: u64,
}

impl DlEntity {
    /// A thread that profiles asks first for its first window's stage.
    pub fn new(runtime: u64, deadline: u64, period: u64, retry_ns: u64, profile_ns: Option<u64>) -> Self {
        let (dl_runtime, dl_deadline, dl_period) = profile_ns.map_or((runtime, deadline, period), |t| (t, t, t));
        DlEntity {
            task_deadline: deadline,
            task_period: period,
            profile_ns,
            window_gen: 0,
            profile_cpu_ns: None,
            dl_runtime,
            dl_deadline,
            dl_period,
            dl_bw: to_ratio(dl_period, dl_runtime),
            runtime: 0,
            deadline: 0,
            throttled: false,
            admitted: false,
            retry_ns,
            misses: 0,
            refusals: 0,
        }
    }

    /// `dl_entity_overflow`: would the remaining runtime, used by the current
    /// deadline, exceed the reserved bandwidth?
    fn overflows(&self, now: Time) -> bool {
        let left = self.deadline.saturating_sub(now) as u128;
        (self.runtime.max(0) as u128) * self.dl_period as u128 > left * self.dl_runtime as u128
    }
}

impl<Q: Queue> Sim<'_, Q> {
    /// Whether `tid` is scheduled by the deadline class now.
    pub(crate) fn is_dl(&self, tid: ThreadId) -> bool {
        self.threads[tid].dl.as_ref().is_some_and(|d| d.admitted)
    }

    /// `sched_setattr(SCHED_DEADLINE)` at the thread's start: admission
    /// control. A refused thread stays in the fair class and retries.
    pub(crate) fn sched_setattr_dl(&mut self, tid: ThreadId) {
        let now = self.now;
        let Some(dl) = self.threads[tid].dl.as_mut() else { return };
        if self.dl_total_bw + dl.dl_bw <= self.dl_capacity_bw {
            self.dl_total_bw += dl.dl_bw;
            dl.admitted = true;
            // The thread calls it on itself, running: `ENQUEUE_RESTORE` finds
            // its deadline (never set) past and starts an instance
            // (`setup_new_dl_entity`), which later changes of parameters keep.
            dl.deadline = now + dl.dl_deadline;
            dl.runtime = dl.dl_runtime as i64;
            return;
        }
        dl.refusals += 1;
        let at = self.now + dl.retry_ns;
        self.events.push(at, Event::DlRetry(tid));
    }

    /// A refused thread tries `sched_setattr` again; if admitted while
    /// runnable, it leaves the fair class at once.
    pub(crate) fn dl_retry(&mut self, tid: ThreadId) {
        if self.threads[tid].state == ThreadState::Done {
            return;
        }
        let cpu = self.threads[tid].cpu;
        let running = self.rqs[cpu].curr == Some(tid);
        if running {
            // Its time so far was fair time, not deadline runtime.
            self.touch(cpu);
            self.account_thread_time(cpu);
        }
        self.sched_setattr_dl(tid);
        let se = self.threads[tid].se;
        if self.is_dl(tid) && self.ses[se].sched_delayed {
            // `__sched_setscheduler`: a delayed task leaving the class is dequeued first.
            self.touch(cpu);
            self.dequeue_delayed(se);
        }
        if !self.is_dl(tid) || self.threads[tid].state != ThreadState::Runnable {
            return;
        }
        // As a block: off the fair runqueues; `schedule` puts the running
        // entity back (`put_prev_task`) before the deadline class takes over.
        self.touch(cpu);
        self.dequeue_task(tid, 0);
        if running {
            self.resched_curr(cpu);
        }
        self.dl_wakeup(tid);
    }

    /// `sched_setattr` of new parameters for an admitted thread: admission
    /// of the change (`__dl_overflow`, its old bandwidth given back), then
    /// `__setparam_dl`. The current instance is kept (`ENQUEUE_RESTORE` starts
    /// a new one only for a queued thread whose deadline has passed).
    /// Refused, nothing changes.
    fn dl_change_attr(&mut self, tid: ThreadId, runtime: u64, deadline: u64, period: u64) -> bool {
        let now = self.now;
        let queued = self.dl_runnable.contains(&tid);
        let dl = self.threads[tid].dl.as_mut().expect("deadline thread");
        let bw = to_ratio(period, runtime);
        if self.dl_total_bw - dl.dl_bw + bw > self.dl_capacity_bw {
            dl.refusals += 1;
            return false;
        }
        self.dl_total_bw = self.dl_total_bw - dl.dl_bw + bw;
        (dl.dl_runtime, dl.dl_deadline, dl.dl_period, dl.dl_bw) = (runtime, deadline, period, bw);
        if queued && dl.deadline < now {
            dl.deadline = now + deadline;
            dl.runtime = runtime as i64;
            let cpu = self.threads[tid].cpu;
            if self.rqs[cpu].curr == Some(tid) {
                self.account_thread_time(cpu);
                self.arm_run_done(cpu);
            }
            self.dl_balance();
        }
        true
    }

    /// A deadline trace thread enters a window at `rate` (004 3.3, Fig. 2):
    /// with a profiling stage, it first asks for a whole core; without, it
    /// reserves the trace's own rate at once.
    pub(crate) fn dl_window_entry(&mut self, tid: ThreadId, rate: f64) {
        let Some(dl) = self.threads[tid].dl.as_mut().filter(|d| d.admitted) else { return };
        dl.window_gen += 1;
        dl.profile_cpu_ns = None;
        let (profiling, gen) = (dl.profile_ns.is_some(), dl.window_gen);
        if profiling {
            self.dl_profile_start(tid, gen);
        } else {
            self.dl_reserve(tid, rate);
        }
    }

    /// Ask for `rate` of a CPU every period: runtime = rate x period.
    fn dl_reserve(&mut self, tid: ThreadId, rate: f64) {
        let dl = self.threads[tid].dl.as_ref().expect("deadline thread");
        let (deadline, period) = (dl.task_deadline, dl.task_period);
        self.dl_change_attr(tid, dl_runtime_at_rate(rate, deadline, period), deadline, period);
    }

    /// The profiling stage: runtime = deadline = period = the stage's length.
    /// Refused (other threads hold the bandwidth), the thread keeps its
    /// reservation and tries again every `retry_ms` until this window ends.
    pub(crate) fn dl_profile_start(&mut self, tid: ThreadId, gen: u64) {
        let dl = self.threads[tid].dl.as_ref().expect("deadline thread");
        if dl.window_gen != gen || self.threads[tid].state == ThreadState::Done {
            return;
        }
        let (stage, retry) = (dl.profile_ns.expect("profiling"), dl.retry_ns);
        if self.dl_change_attr(tid, stage, stage, stage) {
            let cpu_ns = self.thread_cpu_ns(tid);
            self.threads[tid].dl.as_mut().expect("deadline thread").profile_cpu_ns = Some(cpu_ns);
            self.events.push(self.now + stage, Event::DlProfileEnd { tid, gen });
        } else {
            self.events.push(self.now + retry, Event::DlProfile { tid, gen });
        }
    }

    /// End of the profiling stage: the rate measured is the thread's CPU time
    /// in it over its length; reserve that rate for the rest of the window.
    pub(crate) fn dl_profile_end(&mut self, tid: ThreadId, gen: u64) {
        let dl = self.threads[tid].dl.as_ref().expect("deadline thread");
        let Some(since) = dl.profile_cpu_ns.filter(|_| dl.window_gen == gen && dl.admitted) else { return };
        let rate = (self.thread_cpu_ns(tid) - since) as f64 / dl.profile_ns.expect("profiling") as f64;
        self.threads[tid].dl.as_mut().expect("deadline thread").profile_cpu_ns = None;
        self.dl_reserve(tid, rate);
    }

    /// The thread exits: its bandwidth returns to the pool (`task_dead_dl`).
    fn dl_release(&mut self, tid: ThreadId) {
        if let Some(dl) = self.threads[tid].dl.as_mut().filter(|d| d.admitted) {
            self.dl_total_bw -= dl.dl_bw;
            dl.admitted = false;
        }
    }

    /// `enqueue_task_dl` on wake-up, with the CBS rule of `update_dl_entity`:
    /// a deadline in the past, or runtime that would overflow the bandwidth
    /// by it, starts a new instance now.
    pub(crate) fn dl_wakeup(&mut self, tid: ThreadId) {
        let now = self.now;
        self.threads[tid].state = ThreadState::Runnable;
        let dl = self.threads[tid].dl.as_mut().expect("deadline thread");
        if !dl.throttled && (dl.deadline <= now || dl.overflows(now)) {
            dl.deadline = now + dl.dl_deadline;
            dl.runtime = dl.dl_runtime as i64;
        }
        if !dl.throttled {
            self.dl_runnable.push(tid);
        }
        self.dl_balance();
    }

    /// `dequeue_task_dl`: the running deadline thread sleeps or exits.
    pub(crate) fn dl_block(&mut self, tid: ThreadId) {
        self.dl_runnable.retain(|&t| t != tid);
        let cpu = self.threads[tid].cpu;
        if self.rqs[cpu].dl == Some(tid) {
            self.rqs[cpu].dl = None;
            self.update_rq_masks(cpu);
            self.touch(cpu);
            self.resched_curr(cpu);
        }
        if self.threads[tid].state == ThreadState::Done {
            self.dl_release(tid);
        }
        self.dl_balance();
    }

    /// A job (run phase) of a deadline thread ended: late if past its deadline.
    pub(crate) fn dl_job_done(&mut self, tid: ThreadId) {
        let now = self.now;
        if let Some(dl) = self.threads[tid].dl.as_mut().filter(|d| d.admitted) {
            if now > dl.deadline {
                dl.misses += 1;
            }
        }
    }

    /// `update_curr_dl`: the running deadline thread used `delta` of runtime.
    pub(crate) fn update_curr_dl(&mut self, tid: ThreadId, delta: u64) {
        if let Some(dl) = self.threads[tid].dl.as_mut().filter(|d| d.admitted) {
            dl.runtime -= delta as i64;
        }
    }

    /// The running deadline thread's runtime is used up: throttle it until
    /// the start of its next period (`start_dl_timer`).
    pub(crate) fn dl_runtime_exceeded(&mut self, cpu: CpuId) {
        self.touch(cpu);
        self.account_thread_time(cpu);
        let tid = self.rqs[cpu].curr.expect("a running deadline thread");
        let dl = self.threads[tid].dl.as_mut().expect("deadline thread");
        dl.throttled = true;
        let next_period = dl.deadline - dl.dl_deadline + dl.dl_period;
        self.events.push(next_period.max(self.now), Event::DlReplenish(tid));
        self.dl_runnable.retain(|&t| t != tid);
        self.rqs[cpu].dl = None;
        self.update_rq_masks(cpu);
        self.resched_curr(cpu);
        self.dl_balance();
    }

    /// `dl_task_timer` → `replenish_dl_entity`: new instances until the
    /// runtime is positive; a thread that fell behind starts afresh.
    pub(crate) fn dl_replenish(&mut self, tid: ThreadId) {
        let now = self.now;
        let Some(dl) = self.threads[tid].dl.as_mut().filter(|d| d.throttled) else { return };
        dl.throttled = false;
        while dl.runtime <= 0 {
            dl.deadline += dl.dl_period;
            dl.runtime += dl.dl_runtime as i64;
        }
        if dl.deadline < now {
            dl.deadline = now + dl.dl_deadline;
            dl.runtime = dl.dl_runtime as i64;
        }
        if self.threads[tid].state == ThreadState::Runnable {
            self.dl_runnable.push(tid);
            self.dl_balance();
        }
    }

    /// Global EDF: the runnable deadline threads with the earliest deadlines,
    /// one per CPU, are the ones assigned to CPUs (`push_dl_task` /
    /// `pull_dl_task`); a thread keeps its CPU when it can, then takes an idle
    /// one, then one running a fair thread.
    fn dl_balance(&mut self) {
        let mut runnable = self.dl_runnable.clone();
        runnable.sort_by_key(|&t| (self.threads[t].dl.as_ref().expect("deadline thread").deadline, t));
        runnable.truncate(self.nr_cpus());
        for cpu in 0..self.nr_cpus() {
            if self.rqs[cpu].dl.is_some_and(|t| !runnable.contains(&t)) {
                self.rqs[cpu].dl = None;
                self.update_rq_masks(cpu);
                self.touch(cpu);
                self.resched_curr(cpu);
            }
        }
        for &tid in &runnable {
            if (0..self.nr_cpus()).any(|c| self.rqs[c].dl == Some(tid)) {
                continue;
            }
            let prev = self.threads[tid].cpu;
            let free = |c: &CpuId| self.rqs[*c].dl.is_none();
            let cpu = Some(prev)
                .filter(free)
                .or_else(|| (0..self.nr_cpus()).filter(free).find(|&c| self.rqs[c].curr.is_none()))
                .or_else(|| (0..self.nr_cpus()).find(free))
                .expect("no more runnable deadline threads than CPUs");
            self.rqs[cpu].dl = Some(tid);
            self.update_rq_masks(cpu);
            self.threads[tid].cpu = cpu;
            self.touch(cpu);
            self.resched_curr(cpu);
        }
    }
}
