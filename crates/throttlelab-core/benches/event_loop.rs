//! The event loop alone (no parsing, no output serialisation): the busy
//! built-ins' load (run/sleep threads and a request service, mostly
//! unthrottled) at 8, 64 and 256 CPUs, for a short simulated time.
//! `cargo bench -p throttlelab-core --bench event_loop`; not run by the tests.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use throttlelab_core::{load, Sim, SimOptions};

const BUILTINS: [(usize, &str, &str); 3] = [
    (8, "0.5", include_str!("../../../python/throttlelab/scenarios/bench-busy-8cpu.toml")),
    (64, "0.1", include_str!("../../../python/throttlelab/scenarios/bench-busy-64cpu.toml")),
    (256, "0.05", include_str!("../../../python/throttlelab/scenarios/bench-busy-256cpu.toml")),
];

fn event_loop(c: &mut Criterion) {
    let mut group = c.benchmark_group("event_loop");
    group.sample_size(10);
    for (cpus, duration_s, text) in BUILTINS {
        let scenario = load(text, &[format!("duration_s={duration_s}")]).expect("built-in loads");
        // Events of one run, for events per second.
        let events = Sim::new(&scenario, SimOptions::default()).run().0.engine.expect("engine block").events;
        group.throughput(Throughput::Elements(events));
        group.bench_with_input(BenchmarkId::new("busy", format!("{cpus}cpu")), &scenario, |b, s| {
            b.iter(|| Sim::new(s, SimOptions::default()).run())
        });
    }
    group.finish();
}

criterion_group!(benches, event_loop);
criterion_main!(benches);
