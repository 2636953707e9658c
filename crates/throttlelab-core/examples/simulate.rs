//! Simulate a scenario file and print its output's `engine` block: a target
//! for profilers (`valgrind --tool=callgrind`, `perf record`) that runs the
//! engine alone, without Python. `cargo run --release --example simulate -- FILE [KEY=VALUE...]`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: simulate FILE [KEY=VALUE...]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("simulate: {path}: {e}");
        std::process::exit(2);
    });
    let scenario = throttlelab_core::load(&text, &args[1..]).unwrap_or_else(|e| {
        eprintln!("simulate: {e}");
        std::process::exit(2);
    });
    let out = throttlelab_core::simulate(&scenario);
    let engine = out.engine.expect("the simulator reports its engine block");
    println!("events {} wall_s {:.3} events_per_s {:.0}", engine.events, engine.wall_s, engine.events as f64 / engine.wall_s);
}
