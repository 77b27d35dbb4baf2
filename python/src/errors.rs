//! muster-client's errors as Python exceptions.
//!
//! The classes are written in Python (`muster/_errors.py`: constructors with keyword fields,
//! visible to editors and mypy); each [`ClientError`] becomes the instance of the class that
//! names its kind, carrying the protocol's error code and name when the server sent one.

use muster_client::ClientError;
use pyo3::prelude::*;

use crate::types::PyTopicPartition;

/// The Python exception for `err`.
pub fn client_error(err: ClientError) -> PyErr {
    Python::attach(|py| build(py, &err).unwrap_or_else(|failed| failed))
}

/// A muster exception of class `class` with `message` and no protocol code (misuse of the
/// API, found before anything was sent).
pub fn usage_error(class: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| {
        let made = py
            .import("muster._errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| c.call1((message,)));
        match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(failed) => failed,
        }
    })
}

fn class_of(err: &ClientError) -> &'static str {
    match err {
        ClientError::PartitionsNotOwned { .. } => "PartitionsNotOwnedError",
        ClientError::Timeout { .. } => "MusterTimeoutError",
        ClientError::Disconnected | ClientError::Io(_) => "MusterConnectionError",
        ClientError::Config(_) | ClientError::Tls(_) => "ConfigError",
        ClientError::Closed => "MemberClosedError",
        _ => "MusterError",
    }
}

fn build(py: Python<'_>, err: &ClientError) -> PyResult<PyErr> {
    let class = py.import("muster._errors")?.getattr(class_of(err))?;
    let partitions: Vec<PyTopicPartition> = match err {
        ClientError::PartitionsNotOwned { partitions, .. } => {
            partitions.iter().map(PyTopicPartition::from).collect()
        }
        _ => Vec::new(),
    };
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("code", err.code())?;
    kwargs.set_item("name", err.error_code().map(|c| c.name()))?;
    kwargs.set_item("retriable", err.is_retriable())?;
    kwargs.set_item("partitions", partitions)?;
    let exc = class.call((err.to_string(),), Some(&kwargs))?;
    Ok(PyErr::from_value(exc))
}
