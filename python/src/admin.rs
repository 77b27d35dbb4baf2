//! `Admin`: the admin calls of the `muster` CLI (topics, groups, offsets, the cluster), each
//! either blocking (GIL released) or an asyncio awaitable, by how the client was made.

use std::collections::BTreeMap;
use std::future::Future;

use muster_client::{Admin, Client, ClientError, GroupState, ResetTo, TopicInfo, TopicPartitions};
use pyo3::prelude::*;

use crate::convert::ToPy;
use crate::errors::{client_error, usage_error};
use crate::options::ClientOptions;
use crate::runtime::{awaitable, wait, Signals};
use crate::types;

/// An admin client (see `muster.Admin` / `muster.AsyncAdmin`).
#[pyclass(module = "muster._native", name = "AdminClient", frozen)]
pub struct AdminClient {
    admin: Admin,
    /// Methods return awaitables instead of blocking.
    asynchronous: bool,
}

impl AdminClient {
    /// Runs `fut` the client's way and converts its answer.
    fn call<F, T>(&self, py: Python<'_>, fut: F) -> PyResult<Py<PyAny>>
    where
        F: Future<Output = Result<T, ClientError>> + Send + 'static,
        T: ToPy + Send + 'static,
    {
        let converted = async move {
            let value = fut.await.map_err(client_error)?;
            Python::attach(|py| value.to_py(py).map(Bound::unbind))
        };
        if self.asynchronous {
            Ok(awaitable(py, converted)?.unbind())
        } else {
            match wait(py, converted, None, Signals::Interrupt)? {
                Some(result) => result,
                None => Err(client_error(ClientError::Closed)),
            }
        }
    }
}

fn reset_target(
    to_time_ms: Option<u64>,
    shift_by: Option<i64>,
    to_offset: Option<i64>,
    to_earliest_recorded: bool,
) -> PyResult<ResetTo> {
    let given = [
        to_time_ms.is_some(),
        shift_by.is_some(),
        to_offset.is_some(),
        to_earliest_recorded,
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(usage_error(
            "ConfigError",
            "give exactly one of to_time_ms, shift_by, to_offset, to_earliest_recorded",
        ));
    }
    Ok(match (to_time_ms, shift_by, to_offset) {
        (Some(at_ms), _, _) => ResetTo::Time { at_ms },
        (_, Some(delta), _) => ResetTo::ShiftBy { delta },
        (_, _, Some(offset)) => ResetTo::Offset { offset },
        _ => ResetTo::EarliestRecorded,
    })
}

#[pymethods]
impl AdminClient {
    /// Connects (blocking; the GIL is released).
    #[staticmethod]
    fn connect(py: Python<'_>, options: ClientOptions) -> PyResult<AdminClient> {
        crate::logging::refresh_level(py)?;
        let connected = wait(
            py,
            async move { Client::connect(options.client_config()?).await },
            None,
            Signals::Interrupt,
        )?;
        let client = connected
            .unwrap_or(Err(ClientError::Closed))
            .map_err(client_error)?;
        Ok(AdminClient {
            admin: Admin::new(client),
            asynchronous: false,
        })
    }

    /// Connects, as an asyncio awaitable of an admin client whose methods are awaitables.
    #[staticmethod]
    fn connect_async<'py>(py: Python<'py>, options: ClientOptions) -> PyResult<Bound<'py, PyAny>> {
        crate::logging::refresh_level(py)?;
        awaitable(py, async move {
            let config = options.client_config().map_err(client_error)?;
            let client = Client::connect(config).await.map_err(client_error)?;
            Ok(AdminClient {
                admin: Admin::new(client),
                asynchronous: true,
            })
        })
    }

    fn create_topic(&self, py: Python<'_>, topic: String, partitions: i32) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(
            py,
            async move { admin.create_topic(&topic, partitions).await },
        )
    }

    fn ensure_topic(&self, py: Python<'_>, topic: String, partitions: i32) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(
            py,
            async move { admin.ensure_topic(&topic, partitions).await },
        )
    }

    fn list_topics(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.describe_topics(None).await })
    }

    fn describe_topic(&self, py: Python<'_>, topic: String) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.describe_topic(&topic).await })
    }

    #[pyo3(signature = (states = Vec::new()))]
    fn list_groups(&self, py: Python<'_>, states: Vec<String>) -> PyResult<Py<PyAny>> {
        let states = states
            .iter()
            .map(|s| {
                GroupState::parse(s)
                    .ok_or_else(|| usage_error("ConfigError", format!("no group state {s:?}")))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let admin = self.admin.clone();
        self.call(py, async move { admin.list_groups_by_node(&states).await })
    }

    fn describe_group(&self, py: Python<'_>, group: String) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.describe_group(&group).await })
    }

    fn describe_consumer_group(&self, py: Python<'_>, group: String) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(
            py,
            async move { admin.describe_consumer_group(&group).await },
        )
    }

    fn delete_group(&self, py: Python<'_>, group: String) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.delete_group(&group).await })
    }

    fn find_coordinator(&self, py: Python<'_>, group: String) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.find_coordinator(&group).await })
    }

    #[pyo3(signature = (group, limit = 0))]
    fn group_history(&self, py: Python<'_>, group: String, limit: u32) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.group_history(&group, limit).await })
    }

    fn group_diagnosis(&self, py: Python<'_>, group: String) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.group_diagnosis(&group).await })
    }

    #[pyo3(signature = (group, *, remove = Vec::new(), add = 0, partitions = BTreeMap::new()))]
    fn simulate(
        &self,
        py: Python<'_>,
        group: String,
        remove: Vec<String>,
        add: u32,
        partitions: BTreeMap<String, i32>,
    ) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        let partitions: Vec<TopicInfo> = partitions
            .into_iter()
            .map(|(topic, partitions)| TopicInfo { topic, partitions })
            .collect();
        self.call(py, async move {
            let remove: Vec<&str> = remove.iter().map(String::as_str).collect();
            admin.simulate(&group, &remove, add, partitions).await
        })
    }

    fn describe_cluster(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move { admin.describe_cluster().await })
    }

    #[pyo3(signature = (group, partitions = None))]
    fn fetch_offsets(
        &self,
        py: Python<'_>,
        group: String,
        partitions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let partitions = partitions.map(types::partitions).transpose()?;
        let admin = self.admin.clone();
        self.call(py, async move {
            admin.fetch_offsets(&group, partitions.as_deref()).await
        })
    }

    /// Sets a group's offsets (the group must be Empty).
    fn set_offsets(
        &self,
        py: Python<'_>,
        group: String,
        offsets: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let offsets = types::offsets(offsets)?;
        let admin = self.admin.clone();
        self.call(py, async move { admin.set_offsets(&group, offsets).await })
    }

    #[pyo3(signature = (group, *, topic = None, partition = None, limit = 0))]
    fn offset_history(
        &self,
        py: Python<'_>,
        group: String,
        topic: Option<String>,
        partition: Option<i32>,
        limit: u32,
    ) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(py, async move {
            admin
                .offset_history(&group, topic.as_deref(), partition, limit)
                .await
        })
    }

    #[pyo3(signature = (group, *, topics = BTreeMap::new(), to_time_ms = None, shift_by = None,
        to_offset = None, to_earliest_recorded = false, execute = false))]
    #[allow(clippy::too_many_arguments)]
    fn reset_offsets(
        &self,
        py: Python<'_>,
        group: String,
        topics: BTreeMap<String, Option<Vec<i32>>>,
        to_time_ms: Option<u64>,
        shift_by: Option<i64>,
        to_offset: Option<i64>,
        to_earliest_recorded: bool,
        execute: bool,
    ) -> PyResult<Py<PyAny>> {
        let to = reset_target(to_time_ms, shift_by, to_offset, to_earliest_recorded)?;
        // A topic without a partition list means all its partitions, as the CLI's `--topic T`.
        let topics: Vec<TopicPartitions> = topics
            .into_iter()
            .map(|(topic, partitions)| TopicPartitions {
                topic,
                partitions: partitions.unwrap_or_default(),
            })
            .collect();
        let admin = self.admin.clone();
        self.call(py, async move {
            admin.reset_offsets(&group, to, topics, execute).await
        })
    }

    #[pyo3(signature = (group, *, execute = false))]
    fn restore_offsets(&self, py: Python<'_>, group: String, execute: bool) -> PyResult<Py<PyAny>> {
        let admin = self.admin.clone();
        self.call(
            py,
            async move { admin.restore_offsets(&group, execute).await },
        )
    }
}
