//! Model output: any reply text goes through every parser of model replies (JSON recovery
//! from fences and prose, typed facts, decisions and digests, their checks, date
//! annotation at any time) without a panic or a hang. The check is
//! `memlane::fuzzing::model_reply`, which the test suite also runs over the committed corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(reply) = std::str::from_utf8(data) {
        memlane::fuzzing::model_reply(reply);
    }
});
