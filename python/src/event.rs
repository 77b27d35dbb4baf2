//! `RebalanceEvent`: what a member hands the application (muster-client's `Event`), and what
//! `next_event` may return besides (the outcome of a background commit).
//!
//! A revocation or loss holds the member back until the application has dealt with it (the
//! Rust `Partitions` value is dropped): the event keeps that value until `release()`; the
//! Python `Consumer` releases it when the callback returns (or raises), or at the next `poll`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use muster_client::{ClientError, Event, Partitions, TopicPartition};
use pyo3::prelude::*;

use crate::errors::client_error;
use crate::types::PyTopicPartition;

/// Partitions assigned, revoked or lost (Kafka's `ConsumerRebalanceListener` calls).
#[pyclass(module = "muster", name = "RebalanceEvent", frozen)]
pub struct RebalanceEvent {
    kind: &'static str,
    partitions: Vec<TopicPartition>,
    generation: i32,
    epochs: BTreeMap<TopicPartition, i32>,
    /// Dropping it lets the member go on (revoked, lost).
    hold: Mutex<Option<Partitions>>,
}

impl RebalanceEvent {
    /// The event for `event`; `Err` for a fatal error; `None` for kinds this binding does not
    /// know (muster-client's `Event` may grow).
    pub fn from_event(event: Event) -> Result<Option<RebalanceEvent>, ClientError> {
        let (kind, partitions) = match event {
            Event::Assigned(p) => ("assigned", p),
            Event::Revoked(p) => ("revoked", p),
            Event::Lost(p) => ("lost", p),
            Event::Error(e) => return Err(e),
            _ => return Ok(None),
        };
        Ok(Some(RebalanceEvent {
            kind,
            partitions: partitions.partitions().to_vec(),
            generation: partitions.generation(),
            epochs: partitions.ownership_epochs().clone(),
            hold: Mutex::new(Some(partitions)),
        }))
    }
}

#[pymethods]
impl RebalanceEvent {
    /// `"assigned"`, `"revoked"` or `"lost"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// The partitions assigned (eager: the whole assignment; cooperative and the consumer
    /// protocol: those added), revoked, or lost.
    #[getter]
    fn partitions(&self) -> Vec<PyTopicPartition> {
        self.partitions.iter().map(PyTopicPartition::from).collect()
    }

    /// The member's generation (consumer protocol: its member epoch) at the event.
    #[getter]
    fn generation(&self) -> i32 {
        self.generation
    }

    /// The ownership epochs (fencing tokens) of the partitions, where known.
    #[getter]
    fn ownership_epochs(&self) -> BTreeMap<PyTopicPartition, i32> {
        self.epochs
            .iter()
            .map(|(tp, e)| (PyTopicPartition::from(tp), *e))
            .collect()
    }

    /// Lets the member go on with the rebalance (revoked, lost): call once the partitions'
    /// work is stopped and committed. Idempotent.
    fn release(&self) {
        let held = self.hold.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(held);
    }

    /// Whether `release()` was called.
    #[getter]
    fn released(&self) -> bool {
        self.hold
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    fn __repr__(&self) -> String {
        let list: Vec<String> = self.partitions.iter().map(|tp| tp.to_string()).collect();
        format!(
            "RebalanceEvent(kind={:?}, generation={}, partitions=[{}])",
            self.kind,
            self.generation,
            list.join(", ")
        )
    }
}

/// The outcome of a background commit (`Member.commit_background`), by its token.
#[pyclass(module = "muster", name = "CommitResult", frozen)]
pub struct CommitResult {
    #[pyo3(get)]
    token: u64,
    offsets: Vec<(TopicPartition, i64)>,
    error: Mutex<Option<ClientError>>,
}

impl CommitResult {
    pub fn new(
        token: u64,
        offsets: Vec<(TopicPartition, i64)>,
        result: Result<(), ClientError>,
    ) -> Self {
        CommitResult {
            token,
            offsets,
            error: Mutex::new(result.err()),
        }
    }
}

#[pymethods]
impl CommitResult {
    /// The offsets the commit carried.
    #[getter]
    fn offsets(&self) -> BTreeMap<PyTopicPartition, i64> {
        self.offsets
            .iter()
            .map(|(tp, o)| (PyTopicPartition::from(tp), *o))
            .collect()
    }

    /// The commit's error as an exception, or `None` if it succeeded.
    #[getter]
    fn error(&self) -> Option<PyErr> {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .map(client_error)
    }
}
