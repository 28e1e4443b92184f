//! Filters: any JSON is parsed and validated without a panic, and a valid filter selects the
//! same memories in the SQLite store (compiled to SQL) as in the reference store (evaluated
//! in Rust), and as `Filter::matches` says. The check is `memlane::fuzzing::filter`, which
//! the test suite also runs over the committed corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memlane::fuzzing::filter(data);
});
