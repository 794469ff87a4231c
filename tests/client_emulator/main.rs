//! The real ARM client against the in-process emulator, with both held to the official specs.
//!
//! `tests/arm_client.rs` checks the client against scripted answers and `tests/emulator/`
//! checks the emulator with raw HTTP; neither proves the two agree. Here the typed operations of
//! `dsinfra::azure` drive the emulator while the emulator's validation hooks run every request
//! and every answer through `dsinfra::openapi` strictly (unknown properties count): a request the
//! spec forbids is refused with 400 `InvalidRequestContent`, and each test ends by asserting that
//! no request and no answer broke the spec.
//!
//! The response hook doubles as a log of what crossed the wire (method, path, status), which is
//! how the retry tests see every attempt the client made.
//!
//! When the specs are not beside the checkout the tests say so on stderr and pass, except under
//! CI (`CI=true`), where they fail.

mod aml;
mod catalog;
mod errors;
mod fields;
mod harness;
mod hooks;
mod lifecycle;
mod paging;
mod retries;
