//! `muster._native`: the Python binding of muster-client (PyO3, abi3 for CPython >= 3.9).
//!
//! The package `muster` (python/muster/) is the API applications use; this module is what it
//! is built on:
//!
//! - module `runtime`: the one Tokio runtime the module owns, and how Python waits on it
//!   (blocking with the GIL released, or asyncio awaitables);
//! - module `member`: `Member`, one group member (both group protocols), its events and
//!   commits on one queue that Python reads, so callbacks run on the caller's thread or loop;
//! - module `admin`: `AdminClient`, the admin calls of the CLI; module `convert` turns their
//!   answers into Python values;
//! - module `options`: connection settings (token, TLS, mTLS); module `types`: `TopicPartition`
//!   and `OffsetAndMetadata`; module `event`: `RebalanceEvent` and `CommitResult`;
//! - module `errors`: `ClientError` → the exceptions of `muster/_errors.py`;
//! - module `logging`: `tracing` events → Python's `logging` (logger `muster`).
//!
//! A panic in a method becomes a Python exception (PyO3's `PanicException`); the package
//! builds with `panic = "unwind"` for that (python/Cargo.toml).

use pyo3::prelude::*;

mod admin;
mod convert;
mod errors;
mod event;
mod logging;
mod member;
mod options;
mod runtime;
mod types;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logging::install(m.py())?;
    m.add_class::<types::PyTopicPartition>()?;
    m.add_class::<types::PyOffsetAndMetadata>()?;
    m.add_class::<options::ClientOptions>()?;
    m.add_class::<event::RebalanceEvent>()?;
    m.add_class::<event::CommitResult>()?;
    m.add_class::<member::Member>()?;
    m.add_class::<member::Spec>()?;
    m.add_class::<admin::AdminClient>()?;
    m.add_function(wrap_pyfunction!(refresh_log_level, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// Reads the `muster` logger's effective level again (after changing logging's configuration
/// at run time; the module also does it on its own at most once a second).
#[pyfunction]
fn refresh_log_level(py: Python<'_>) -> PyResult<()> {
    logging::refresh_level(py)
}
