//! The module's one Tokio runtime, and the two ways Python waits on it.
//!
//! muster-client is async (Tokio). The module owns a multi-thread runtime, made on first use
//! and kept for the process's life: members heartbeat on its worker threads whatever the
//! Python threads do. Python reaches it in two ways:
//!
//! - [`wait`]: a blocking call. The GIL is released while the future runs (other Python
//!   threads go on), and every [`SIGNAL_CHECK`] the thread takes the GIL back for a moment to
//!   run Python's signal handlers, so Ctrl-C interrupts a blocking call (`KeyboardInterrupt`)
//!   instead of waiting for the network;
//! - [`awaitable`]: an asyncio awaitable (pyo3-async-runtimes), completed on the caller's
//!   event loop.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

/// How long a blocking call waits before it runs Python's signal handlers again: short enough
/// that Ctrl-C feels immediate, long enough that waiting costs nothing measurable.
pub const SIGNAL_CHECK: Duration = Duration::from_millis(50);

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The runtime, started on first use.
pub fn runtime() -> PyResult<&'static Runtime> {
    let made = RUNTIME.get_or_init(|| {
        // A few workers: heartbeats of many members in one process spread over them, and the
        // interpreter's threads are not slowed by more runtime threads than cores.
        let workers = std::thread::available_parallelism()
            .map(|n| n.get().clamp(1, 4))
            .unwrap_or(2);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("muster-tokio")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(runtime)
    });
    match made {
        Ok(runtime) => {
            // Already set is fine: the same runtime, or an application's own made earlier.
            let _ = pyo3_async_runtimes::tokio::init_with_runtime(runtime);
            Ok(runtime)
        }
        Err(e) => Err(PyRuntimeError::new_err(format!(
            "cannot start the Tokio runtime: {e}"
        ))),
    }
}

/// Whether a blocking wait may be cut short by a Python exception raised by a signal handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signals {
    /// Ctrl-C stops the wait (and the work: the future is aborted).
    Interrupt,
    /// The work finishes first (closing a member: leaving the group must not be cut short);
    /// a pending `KeyboardInterrupt` is raised by the interpreter afterwards.
    Defer,
}

/// Runs `fut` on the runtime and waits for it with the GIL released, at most `timeout`
/// (`None`: until it finishes). `Ok(None)`: the timeout passed (the future is aborted).
pub fn wait<F, T>(
    py: Python<'_>,
    fut: F,
    timeout: Option<Duration>,
    signals: Signals,
) -> PyResult<Option<T>>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let runtime = runtime()?;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut task = runtime.spawn(fut);
    loop {
        let slice = match deadline {
            Some(deadline) => deadline
                .saturating_duration_since(Instant::now())
                .min(SIGNAL_CHECK),
            None => SIGNAL_CHECK,
        };
        let step =
            py.detach(|| runtime.block_on(async { tokio::time::timeout(slice, &mut task).await }));
        match step {
            Ok(Ok(value)) => return Ok(Some(value)),
            Ok(Err(join)) => {
                return Err(PyRuntimeError::new_err(format!(
                    "muster's background task failed: {join}"
                )))
            }
            Err(_elapsed) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(stop(py, runtime, task));
                }
                if signals == Signals::Interrupt {
                    if let Err(interrupted) = py.check_signals() {
                        // What finished meanwhile is dropped: the caller is being interrupted.
                        drop(stop(py, runtime, task));
                        return Err(interrupted);
                    }
                }
            }
        }
    }
}

/// Aborts `task`, and returns its value if it finished before the abort took (so that a value
/// the task already took from somewhere, such as an event from a queue, is not lost).
fn stop<T: Send + 'static>(
    py: Python<'_>,
    runtime: &'static Runtime,
    mut task: tokio::task::JoinHandle<T>,
) -> Option<T> {
    task.abort();
    py.detach(|| runtime.block_on(&mut task)).ok()
}

/// Runs `fut` on the runtime, as an asyncio awaitable of the running event loop.
pub fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    runtime()?;
    pyo3_async_runtimes::tokio::future_into_py(py, fut)
}
