//! The client's `tracing` events, delivered to Python's `logging` (logger `muster`), so that
//! an application's logging configuration (handlers, format, level) applies to them.
//!
//! Events happen on the runtime's threads, which must never wait for the GIL (a Python thread
//! holding it for a while would delay heartbeats): the layer formats an event and sends it to
//! a channel, and one thread of the module's own (`muster-log`) takes the GIL to hand the
//! records to `logging`. Which events are wanted is read from the logger's effective level,
//! kept in an atomic: [`refresh_level`] reads it again (the module does when a member or an
//! admin client starts, and at most once a second from `poll`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// Python's logging levels; `tracing`'s TRACE is below DEBUG.
const TRACE: u8 = 5;
const DEBUG: u8 = 10;
const INFO: u8 = 20;
const WARNING: u8 = 30;
const ERROR: u8 = 40;

/// The logger's effective level (Python's numbering); WARNING until read.
static LEVEL: AtomicU8 = AtomicU8::new(WARNING);
static SENDER: OnceLock<Mutex<mpsc::Sender<Record>>> = OnceLock::new();
static LAST_REFRESH: Mutex<Option<Instant>> = Mutex::new(None);

struct Record {
    level: u8,
    target: String,
    message: String,
}

fn python_level(level: &Level) -> u8 {
    match *level {
        Level::TRACE => TRACE,
        Level::DEBUG => DEBUG,
        Level::INFO => INFO,
        Level::WARN => WARNING,
        Level::ERROR => ERROR,
    }
}

struct PythonLogging;

impl<S: Subscriber> Layer<S> for PythonLogging {
    fn register_callsite(&self, _metadata: &'static Metadata<'static>) -> Interest {
        // The level can change at run time: ask `enabled` at every event.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        python_level(metadata.level()) >= LEVEL.load(Ordering::Relaxed)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let record = Record {
            level: python_level(event.metadata().level()),
            target: event.metadata().target().to_owned(),
            message: fields.text,
        };
        if let Some(sender) = SENDER.get() {
            let sender = sender.lock().unwrap_or_else(|p| p.into_inner());
            let _ = sender.send(record);
        }
    }
}

/// `message key=value key=value`, as tracing's own formatter writes an event.
#[derive(Default)]
struct Fields {
    text: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let mut message = format!("{value:?}");
            if !self.text.is_empty() {
                message.push(' ');
                message.push_str(&self.text);
            }
            self.text = message;
        } else {
            if !self.text.is_empty() {
                self.text.push(' ');
            }
            let _ = write!(self.text, "{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            if !self.text.is_empty() {
                self.text.push(' ');
            }
            let _ = write!(self.text, "{}={value}", field.name());
        }
    }
}

/// Installs the layer as the process's `tracing` subscriber (once; if another library of the
/// process installed one first, the client's events go there instead) and starts the thread
/// that hands records to Python.
pub fn install(py: Python<'_>) -> PyResult<()> {
    let logger: Py<PyAny> = py
        .import("logging")?
        .call_method1("getLogger", ("muster",))?
        .unbind();
    let (tx, rx) = mpsc::channel::<Record>();
    if SENDER.set(Mutex::new(tx)).is_err() {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("muster-log".into())
        .spawn(move || {
            for record in rx {
                Python::attach(|py| {
                    let extra = pyo3::types::PyDict::new(py);
                    let _ = extra.set_item("muster_target", &record.target);
                    let kwargs = pyo3::types::PyDict::new(py);
                    let _ = kwargs.set_item("extra", extra);
                    // A handler that raises must not end the thread; logging reports its own
                    // handler errors through `logging.raiseExceptions`.
                    let _ = logger.call_method(
                        py,
                        "log",
                        (record.level, "%s", record.message),
                        Some(&kwargs),
                    );
                });
            }
        })
        .map_err(|e| {
            pyo3::exceptions::PyRuntimeError::new_err(format!(
                "cannot start the logging thread: {e}"
            ))
        })?;
    let _ = tracing_subscriber::registry()
        .with(PythonLogging)
        .try_init();
    refresh_level(py)
}

/// Reads the `muster` logger's effective level again.
pub fn refresh_level(py: Python<'_>) -> PyResult<()> {
    let level: u32 = py
        .import("logging")?
        .call_method1("getLogger", ("muster",))?
        .call_method0("getEffectiveLevel")?
        .extract()?;
    LEVEL.store(u8::try_from(level).unwrap_or(u8::MAX), Ordering::Relaxed);
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

/// [`refresh_level`] if it was last done more than a second ago.
pub fn refresh_level_now_and_then(py: Python<'_>) -> PyResult<()> {
    let due = {
        let mut last = LAST_REFRESH.lock().unwrap_or_else(|p| p.into_inner());
        let due = last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
        if due {
            *last = Some(Instant::now());
        }
        due
    };
    if due {
        refresh_level(py)?;
    }
    Ok(())
}
