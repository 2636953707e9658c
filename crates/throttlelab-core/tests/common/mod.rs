//! What every property test shares: a configuration that is deterministic
//! unless asked otherwise.

use proptest::test_runner::{Config, RngSeed};

/// The seed CI draws every property's cases from.
const CI_SEED: u64 = 0x7468_726f_7474_6c65; // "throttle"

/// `default_cases` cases drawn from a fixed seed, so a test run passes or
/// fails the same way every time; `PROPTEST_CASES` and `PROPTEST_RNG_SEED`
/// (as `scripts/explore.sh` sets them) override either. Cases in the
/// `.proptest-regressions` files run first in both modes.
pub fn proptest_config(default_cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(CI_SEED);
    }
    config
}
