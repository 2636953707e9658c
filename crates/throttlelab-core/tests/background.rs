//! The machine's background preemptions: each as long as `background_us`,
//! or, with `background_p50_us`, a log-normal draw with that median and
//! `background_us` as its mean: a host's preemptions by other work are many
//! short ones and a few long ones (docs/fidelity.md, "Two spinners at 20 ms,
//! charge by charge": 21-40 us at the median, 219-680 us on average).
//! With `background_lengths_us`, each takes one of the measured lengths.

mod common;

use throttlelab_core::load;
use throttlelab_core::trace::{Record, TraceKind};

/// One spinner in a group on one quiet CPU (`common::QUIET_ONE_CPU`) and,
/// set by `load`'s overrides, 100 background preemptions a second of 100 us
/// (on average).
const SPINNER: &str = r#"
[kernel]
profile = "6.18"
[[cgroup]]
name = "app"
[[task]]
name = "spin"
cgroup = "app"
phases = [{ run_us = 1_000_000_000 }]
"#;

fn spinner(extra: &[&str]) -> Result<throttlelab_core::Scenario, throttlelab_core::ScenarioError> {
    let text = format!("name = \"background\"\nduration_s = 20\n{}{SPINNER}", common::QUIET_ONE_CPU);
    let keys: Vec<String> = ["machine.background_per_s=100", "machine.background_us=100"].iter().chain(extra).map(|k| k.to_string()).collect();
    load(&text, &keys)
}

/// How long each background preemption held the CPU, in us: from the switch
/// to a root-group thread to the next switch.
fn preemptions_us(records: &[Record]) -> Vec<f64> {
    let switches: Vec<&Record> = records.iter().filter(|r| matches!(r.kind, TraceKind::Switch(Some(_)))).collect();
    switches.windows(2).filter(|w| w[0].tg == 0).map(|w| (w[1].time - w[0].time) as f64 / 1e3).collect()
}

#[test]
fn background_preemptions_take_the_mean_or_a_distribution_with_its_median() {
    let (_, records) = common::traced(&spinner(&[]).unwrap(), true);
    let constant = preemptions_us(&records);
    assert!(constant.len() > 1500, "{} preemptions", constant.len());
    assert!(constant.iter().all(|&us| (us - 100.0).abs() < 1.0), "every one as long as background_us");

    let (_, records) = common::traced(&spinner(&["machine.background_p50_us=50"]).unwrap(), true);
    let mut drawn = preemptions_us(&records);
    let mean = drawn.iter().sum::<f64>() / drawn.len() as f64;
    drawn.sort_by(f64::total_cmp);
    let median = drawn[drawn.len() / 2];
    assert!(drawn.len() > 1500, "{} preemptions", drawn.len());
    assert!((median / 50.0 - 1.0).abs() < 0.1, "median {median} us");
    assert!((mean / 100.0 - 1.0).abs() < 0.15, "mean {mean} us");
    assert!(drawn[drawn.len() / 10] < 20.0 && drawn[drawn.len() * 9 / 10] > 150.0, "spread: {} .. {}", drawn[drawn.len() / 10], drawn[drawn.len() * 9 / 10]);
}

#[test]
fn a_median_above_the_mean_is_refused() {
    for bad in ["machine.background_p50_us=101", "machine.background_p50_us=0", "machine.background_p50_us=-5"] {
        let e = spinner(&[bad]).unwrap_err();
        assert_eq!(e.key, "machine.background_p50_us", "{bad}: {e:?}");
    }
}

#[test]
fn measured_lengths_are_drawn_as_they_were_measured() {
    // Nine short and one long, as the host's are (docs/fidelity.md, "The
    // background's lengths, as measured"); a median given too is overruled.
    // The long one within a base slice (700 us), so that no tick hands the
    // CPU back to the spinner in its middle and splits it in two.
    let lengths = "machine.background_lengths_us=[10, 10, 12, 12, 12, 14, 14, 16, 16, 600]";
    let (_, records) = common::traced(&spinner(&[lengths, "machine.background_p50_us=50"]).unwrap(), true);
    let drawn = preemptions_us(&records);
    assert!(drawn.len() > 1500, "{} preemptions", drawn.len());
    let long = drawn.iter().filter(|&&us| us > 500.0).count() as f64 / drawn.len() as f64;
    assert!((0.07..0.13).contains(&long), "one in ten of 600 us: {long}");
    let odd: Vec<&f64> = drawn.iter().filter(|&&us| ![10.0, 12.0, 14.0, 16.0, 600.0].iter().any(|l| (us - l).abs() < 1.0)).collect();
    assert!(odd.is_empty(), "only the lengths given: {} others, {:?}", odd.len(), &odd[..odd.len().min(20)]);
}

#[test]
fn lengths_out_of_range_are_refused() {
    let many = format!("machine.background_lengths_us=[{}]", vec!["5"; 257].join(", "));
    for bad in ["machine.background_lengths_us=[10, 0]", "machine.background_lengths_us=[-1]", "machine.background_lengths_us=[2000000]", many.as_str()] {
        let e = spinner(&[bad]).unwrap_err();
        assert_eq!(e.key, "machine.background_lengths_us", "{bad}: {e:?}");
    }
}
