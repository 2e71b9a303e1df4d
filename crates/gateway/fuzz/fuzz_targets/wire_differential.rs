//! The gateway's own HTTP/1.1 client (`wire.rs`) and hyper's read the same upstream bytes; any
//! disagreement beyond the listed ones (`gateway::differential`) is a crash.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    if let Err(disagreement) = gateway::differential::check(input) {
        panic!("{disagreement}");
    }
});
