//! The small value types shared by the member and admin APIs: `TopicPartition` and
//! `OffsetAndMetadata`, and reading offsets given from Python.

use muster_client::{OffsetAndMetadata, TopicPartition};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A partition of a topic. Hashable and ordered: usable as a dict key, sortable.
#[pyclass(module = "muster", name = "TopicPartition", frozen, eq, ord, hash)]
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyTopicPartition {
    #[pyo3(get)]
    pub topic: String,
    #[pyo3(get)]
    pub partition: i32,
}

#[pymethods]
impl PyTopicPartition {
    #[new]
    fn new(topic: String, partition: i32) -> Self {
        PyTopicPartition { topic, partition }
    }

    fn __repr__(&self) -> String {
        format!("TopicPartition({:?}, {})", self.topic, self.partition)
    }

    fn __str__(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Lets copy and pickle rebuild it.
    fn __getnewargs__(&self) -> (String, i32) {
        (self.topic.clone(), self.partition)
    }
}

impl From<&TopicPartition> for PyTopicPartition {
    fn from(tp: &TopicPartition) -> Self {
        PyTopicPartition {
            topic: tp.topic.clone(),
            partition: tp.partition,
        }
    }
}

impl From<PyTopicPartition> for TopicPartition {
    fn from(tp: PyTopicPartition) -> Self {
        TopicPartition::new(tp.topic, tp.partition)
    }
}

/// A committed offset and the metadata stored with it.
#[pyclass(module = "muster", name = "OffsetAndMetadata", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyOffsetAndMetadata {
    #[pyo3(get)]
    pub offset: i64,
    #[pyo3(get)]
    pub metadata: Option<String>,
}

#[pymethods]
impl PyOffsetAndMetadata {
    #[new]
    #[pyo3(signature = (offset, metadata = None))]
    fn new(offset: i64, metadata: Option<String>) -> Self {
        PyOffsetAndMetadata { offset, metadata }
    }

    fn __repr__(&self) -> String {
        match &self.metadata {
            Some(m) => format!("OffsetAndMetadata({}, {m:?})", self.offset),
            None => format!("OffsetAndMetadata({})", self.offset),
        }
    }
}

impl From<&OffsetAndMetadata> for PyOffsetAndMetadata {
    fn from(o: &OffsetAndMetadata) -> Self {
        PyOffsetAndMetadata {
            offset: o.offset,
            metadata: o.metadata.clone(),
        }
    }
}

/// A `TopicPartition`, or a `(topic, partition)` tuple.
pub fn topic_partition(value: &Bound<'_, PyAny>) -> PyResult<TopicPartition> {
    if let Ok(tp) = value.extract::<PyTopicPartition>() {
        return Ok(tp.into());
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        if let Ok((topic, partition)) = tuple.extract::<(String, i32)>() {
            return Ok(TopicPartition::new(topic, partition));
        }
    }
    Err(PyTypeError::new_err(format!(
        "expected a TopicPartition or a (topic, partition) tuple, got {}",
        value.repr().map_or_else(|_| "?".into(), |r| r.to_string())
    )))
}

/// An `int` offset or an `OffsetAndMetadata`.
fn offset(value: &Bound<'_, PyAny>) -> PyResult<OffsetAndMetadata> {
    if let Ok(o) = value.extract::<PyOffsetAndMetadata>() {
        return Ok(OffsetAndMetadata {
            offset: o.offset,
            metadata: o.metadata,
        });
    }
    match value.extract::<i64>() {
        Ok(offset) => Ok(OffsetAndMetadata::new(offset)),
        Err(_) => Err(PyTypeError::new_err(
            "an offset is an int or an OffsetAndMetadata",
        )),
    }
}

/// Offsets given as a mapping `{partition: offset}` or an iterable of `(partition, offset)`
/// pairs, partitions as in [`topic_partition`], offsets as in [`offset`].
pub fn offsets(value: &Bound<'_, PyAny>) -> PyResult<Vec<(TopicPartition, OffsetAndMetadata)>> {
    let pairs = if value.hasattr("items")? {
        value.call_method0("items")?
    } else {
        value.clone()
    };
    let mut out = Vec::new();
    for pair in pairs.try_iter()? {
        let (tp, o): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair?.extract()?;
        out.push((topic_partition(&tp)?, offset(&o)?));
    }
    Ok(out)
}

/// Partitions given as an iterable of `TopicPartition` or `(topic, partition)`.
pub fn partitions(value: &Bound<'_, PyAny>) -> PyResult<Vec<TopicPartition>> {
    value
        .try_iter()?
        .map(|item| topic_partition(&item?))
        .collect()
}
