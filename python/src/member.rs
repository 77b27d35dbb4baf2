//! `Member`: one muster-client `GroupMember`, driven from Python.
//!
//! The member's events and the outcomes of background commits arrive on one queue
//! ([`Item`]), read by `next_event` (blocking, GIL released) or `next_event_async` (asyncio):
//! the Python `Consumer` runs the application's callbacks from there, on the caller's thread
//! or event loop. Membership itself (heartbeats, rejoins) runs on the module's runtime and
//! never waits for Python.

use std::sync::Arc;
use std::time::Duration;

use muster_client::{
    Client, ClientError, Events, GroupMember, GroupProtocol, MemberConfig, MemberState,
    OffsetAndMetadata, Phase, TopicPartition,
};
use pyo3::prelude::*;
use tokio::sync::{mpsc, watch, Mutex as AsyncMutex, RwLock};

use crate::errors::{client_error, usage_error};
use crate::event::{CommitResult, RebalanceEvent};
use crate::options::ClientOptions;
use crate::runtime::{awaitable, wait, Signals};
use crate::types::{self, PyOffsetAndMetadata, PyTopicPartition};

/// What `next_event` returns.
enum Item {
    Event(muster_client::Event),
    Committed(CommitResult),
}

struct Inner {
    group_id: String,
    /// `None` once closed.
    member: RwLock<Option<GroupMember>>,
    state: watch::Receiver<MemberState>,
    items_tx: mpsc::UnboundedSender<Item>,
    items_rx: AsyncMutex<mpsc::UnboundedReceiver<Item>>,
    /// Set once the member is closed: a `next_event` waiting (in another thread) returns
    /// rather than wait for items that will not come (`items_tx` lives as long as `Inner`).
    closed: watch::Sender<bool>,
}

/// A member of a consumer group (see `muster.Consumer` for the API meant for applications).
#[pyclass(module = "muster._native", name = "Member", frozen)]
pub struct Member {
    inner: Arc<Inner>,
}

/// The member's settings, as `Consumer.subscribe` passes them.
#[pyclass(module = "muster._native", name = "MemberSpec", frozen)]
#[derive(Clone)]
pub struct Spec {
    group: String,
    topics: Vec<String>,
    protocol: GroupProtocol,
    assignors: Vec<String>,
    server_assignor: Option<String>,
    session_timeout_ms: u64,
    rebalance_timeout_ms: u64,
    heartbeat_interval_ms: Option<u64>,
    instance_id: Option<String>,
}

#[pymethods]
impl Spec {
    #[new]
    #[pyo3(signature = (group, topics, *, protocol, assignors, server_assignor,
        session_timeout_ms, rebalance_timeout_ms, heartbeat_interval_ms, instance_id))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        group: String,
        topics: Vec<String>,
        protocol: &str,
        assignors: Vec<String>,
        server_assignor: Option<String>,
        session_timeout_ms: u64,
        rebalance_timeout_ms: u64,
        heartbeat_interval_ms: Option<u64>,
        instance_id: Option<String>,
    ) -> PyResult<Spec> {
        let protocol: GroupProtocol = protocol
            .parse()
            .map_err(|e: String| usage_error("ConfigError", e))?;
        let spec = Spec {
            group,
            topics,
            protocol,
            assignors,
            server_assignor,
            session_timeout_ms,
            rebalance_timeout_ms,
            heartbeat_interval_ms,
            instance_id,
        };
        // Checked now, so that a mistake is raised where it was made.
        spec.config().map_err(client_error)?;
        Ok(spec)
    }
}

impl Spec {
    fn config(&self) -> Result<MemberConfig, ClientError> {
        let mut config = MemberConfig::new(self.group.clone(), self.topics.iter().cloned())
            .group_protocol(self.protocol)
            .session_timeout(Duration::from_millis(self.session_timeout_ms))
            .rebalance_timeout(Duration::from_millis(self.rebalance_timeout_ms));
        if self.protocol == GroupProtocol::Classic || !self.assignors.is_empty() {
            config = config.assignor_names(&self.assignors)?;
        }
        if let Some(ms) = self.heartbeat_interval_ms {
            config = config.heartbeat_interval(Duration::from_millis(ms));
        }
        if let Some(id) = &self.instance_id {
            config = config.group_instance_id(id);
        }
        if let Some(name) = &self.server_assignor {
            config = config.server_assignor(name);
        }
        Ok(config)
    }

    async fn start(self, options: ClientOptions) -> Result<Member, ClientError> {
        let config = self.config()?;
        let client = Client::connect(options.client_config()?).await?;
        let (member, events) = config.start(client)?;
        Ok(Member::new(self.group, member, events))
    }
}

impl Member {
    fn new(group_id: String, member: GroupMember, mut events: Events) -> Member {
        let (items_tx, items_rx) = mpsc::unbounded_channel();
        let forward = items_tx.clone();
        // Runs on the runtime (the caller is in it): the member's events join the queue that
        // background commits report to. Ends with the member's event stream.
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                if forward.send(Item::Event(event)).is_err() {
                    break;
                }
            }
        });
        Member {
            inner: Arc::new(Inner {
                group_id,
                state: member.watch_state(),
                member: RwLock::new(Some(member)),
                items_tx,
                items_rx: AsyncMutex::new(items_rx),
                closed: watch::Sender::new(false),
            }),
        }
    }
}

/// The next item of the queue, as a Python object (`None` when the member has stopped).
/// `None` also when `timeout` passes first (receiving is cancel-safe: nothing is lost).
async fn next_item(inner: Arc<Inner>, timeout: Option<Duration>) -> PyResult<Option<Py<PyAny>>> {
    let mut closed = inner.closed.subscribe();
    let mut rx = inner.items_rx.lock().await;
    loop {
        let next = async {
            tokio::select! {
                biased;
                item = rx.recv() => item,
                // Closed: what is queued still comes out, then `None`.
                _ = closed.wait_for(|c| *c) => rx.try_recv().ok(),
            }
        };
        let received = match timeout {
            Some(timeout) => match tokio::time::timeout(timeout, next).await {
                Ok(received) => received,
                Err(_elapsed) => return Ok(None),
            },
            None => next.await,
        };
        let Some(item) = received else {
            return Ok(None);
        };
        let object = match item {
            Item::Event(event) => match RebalanceEvent::from_event(event) {
                Ok(Some(event)) => Python::attach(|py| Py::new(py, event).map(Py::into_any))?,
                Ok(None) => continue,
                Err(fatal) => return Err(client_error(fatal)),
            },
            Item::Committed(result) => Python::attach(|py| Py::new(py, result).map(Py::into_any))?,
        };
        return Ok(Some(object));
    }
}

async fn commit(
    inner: Arc<Inner>,
    offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
) -> Result<(), ClientError> {
    let guard = inner.member.read().await;
    let member = guard.as_ref().ok_or(ClientError::Closed)?;
    member.commit_offsets(offsets).await
}

async fn fetch(inner: Arc<Inner>, partitions: Option<Vec<TopicPartition>>) -> PyResult<Py<PyAny>> {
    let guard = inner.member.read().await;
    let member = guard
        .as_ref()
        .ok_or(ClientError::Closed)
        .map_err(client_error)?;
    let offsets = member
        .fetch_offsets(partitions.as_deref())
        .await
        .map_err(client_error)?;
    Python::attach(|py| {
        let dict = pyo3::types::PyDict::new(py);
        for (tp, o) in &offsets {
            dict.set_item(PyTopicPartition::from(tp), PyOffsetAndMetadata::from(o))?;
        }
        Ok(dict.into_any().unbind())
    })
}

async fn close(inner: Arc<Inner>) -> Result<(), ClientError> {
    let member = inner.member.write().await.take();
    let result = match member {
        Some(member) => member.close().await,
        None => Ok(()),
    };
    inner.closed.send_replace(true);
    result
}

fn secs(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    timeout
        .map(|t| {
            Duration::try_from_secs_f64(t.max(0.0))
                .map_err(|e| usage_error("ConfigError", format!("timeout {t}: {e}")))
        })
        .transpose()
}

fn optional_partitions(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<TopicPartition>>> {
    value.map(types::partitions).transpose()
}

#[pymethods]
impl Member {
    /// Connects and starts a member (blocking; the GIL is released).
    #[staticmethod]
    fn start(py: Python<'_>, options: ClientOptions, spec: Spec) -> PyResult<Member> {
        crate::logging::refresh_level(py)?;
        let started = wait(py, spec.start(options), None, Signals::Interrupt)?;
        match started {
            Some(result) => result.map_err(client_error),
            None => Err(client_error(ClientError::Closed)),
        }
    }

    /// `start`, as an asyncio awaitable.
    #[staticmethod]
    fn start_async<'py>(
        py: Python<'py>,
        options: ClientOptions,
        spec: Spec,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::logging::refresh_level(py)?;
        awaitable(py, async move {
            spec.start(options).await.map_err(client_error)
        })
    }

    /// The next event (`RebalanceEvent`), or background commit outcome (`CommitResult`),
    /// waiting at most `timeout` seconds (`None`: until one comes). `None` when the timeout
    /// passed or the member has stopped. Raises the member's fatal error.
    #[pyo3(signature = (timeout = None))]
    fn next_event(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        crate::logging::refresh_level_now_and_then(py)?;
        let timeout = secs(timeout)?;
        let inner = Arc::clone(&self.inner);
        Ok(
            wait(py, next_item(inner, timeout), None, Signals::Interrupt)?
                .transpose()?
                .flatten(),
        )
    }

    /// The next event or commit outcome if one is already queued, else `None`, without
    /// waiting or leaving the calling thread: `poll` asks this first, so a poll that finds
    /// the queue empty or ready costs no round trip through the runtime. Raises the member's
    /// fatal error.
    fn try_next_event(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        // Another poll waiting holds the queue: nothing to take here.
        let Ok(mut rx) = self.inner.items_rx.try_lock() else {
            return Ok(None);
        };
        while let Ok(item) = rx.try_recv() {
            match item {
                Item::Event(event) => match RebalanceEvent::from_event(event) {
                    Ok(Some(event)) => return Ok(Some(Py::new(py, event)?.into_any())),
                    Ok(None) => continue,
                    Err(fatal) => return Err(client_error(fatal)),
                },
                Item::Committed(result) => return Ok(Some(Py::new(py, result)?.into_any())),
            }
        }
        Ok(None)
    }

    /// `next_event()` as an asyncio awaitable. Give the timeout here rather than through
    /// `asyncio.wait_for`: a cancelled wait could drop an event that arrived at that moment.
    #[pyo3(signature = (timeout = None))]
    fn next_event_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::logging::refresh_level_now_and_then(py)?;
        let timeout = secs(timeout)?;
        awaitable(py, next_item(Arc::clone(&self.inner), timeout))
    }

    /// Commits `offsets` (a mapping or pairs of partition and offset) and waits for the
    /// answer.
    fn commit(&self, py: Python<'_>, offsets: &Bound<'_, PyAny>) -> PyResult<()> {
        let offsets = types::offsets(offsets)?;
        let done = wait(
            py,
            commit(Arc::clone(&self.inner), offsets),
            None,
            Signals::Interrupt,
        )?;
        done.unwrap_or(Err(ClientError::Closed))
            .map_err(client_error)
    }

    /// `commit`, as an asyncio awaitable.
    fn commit_async<'py>(
        &self,
        py: Python<'py>,
        offsets: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let offsets = types::offsets(offsets)?;
        let inner = Arc::clone(&self.inner);
        awaitable(py, async move {
            commit(inner, offsets).await.map_err(client_error)
        })
    }

    /// Sends the commit and returns at once; its outcome comes from `next_event` as a
    /// `CommitResult` carrying `token`.
    fn commit_background(&self, offsets: &Bound<'_, PyAny>, token: u64) -> PyResult<()> {
        let offsets = types::offsets(offsets)?;
        let inner = Arc::clone(&self.inner);
        crate::runtime::runtime()?.spawn(async move {
            let reported: Vec<(TopicPartition, i64)> = offsets
                .iter()
                .map(|(tp, o)| (tp.clone(), o.offset))
                .collect();
            let result = commit(Arc::clone(&inner), offsets).await;
            let _ = inner
                .items_tx
                .send(Item::Committed(CommitResult::new(token, reported, result)));
        });
        Ok(())
    }

    /// The group's committed offsets for `partitions` (`None`: all).
    #[pyo3(signature = (partitions = None))]
    fn fetch_offsets(
        &self,
        py: Python<'_>,
        partitions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let partitions = optional_partitions(partitions)?;
        let fetched = wait(
            py,
            fetch(Arc::clone(&self.inner), partitions),
            None,
            Signals::Interrupt,
        )?;
        fetched.unwrap_or_else(|| Err(client_error(ClientError::Closed)))
    }

    /// `fetch_offsets`, as an asyncio awaitable.
    #[pyo3(signature = (partitions = None))]
    fn fetch_offsets_async<'py>(
        &self,
        py: Python<'py>,
        partitions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let partitions = optional_partitions(partitions)?;
        awaitable(py, fetch(Arc::clone(&self.inner), partitions))
    }

    /// Leaves the group (LeaveGroup, or the consumer protocol's leave heartbeat) and stops.
    /// Not cut short by Ctrl-C: a member that leaves hands its partitions over at once.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let done = wait(py, close(Arc::clone(&self.inner)), None, Signals::Defer)?;
        done.unwrap_or(Ok(())).map_err(client_error)
    }

    /// `close`, as an asyncio awaitable.
    fn close_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = Arc::clone(&self.inner);
        awaitable(py, async move { close(inner).await.map_err(client_error) })
    }

    #[getter]
    fn group_id(&self) -> String {
        self.inner.group_id.clone()
    }

    #[getter]
    fn member_id(&self) -> String {
        self.inner.state.borrow().member_id.clone()
    }

    /// The generation (consumer protocol: the member epoch).
    #[getter]
    fn generation(&self) -> i32 {
        self.inner.state.borrow().generation_id
    }

    /// What the member owns now.
    #[getter]
    fn assignment(&self) -> Vec<PyTopicPartition> {
        self.inner
            .state
            .borrow()
            .assignment
            .iter()
            .map(PyTopicPartition::from)
            .collect()
    }

    /// `joining`, `syncing`, `stable`, `closed` or `failed`.
    #[getter]
    fn phase(&self) -> &'static str {
        match self.inner.state.borrow().phase {
            Phase::Joining => "joining",
            Phase::Syncing => "syncing",
            Phase::Stable => "stable",
            Phase::Closed => "closed",
            Phase::Failed => "failed",
        }
    }
}
