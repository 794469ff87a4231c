//! The engine: turns a plan into ARM calls, in dependency order and in parallel, saving state
//! after every change and reporting progress as events (it never writes to the terminal).
//!
//! Only the parallel walk exists so far; apply, destroy, park and refresh build on it (issue 4).

pub mod walk;
