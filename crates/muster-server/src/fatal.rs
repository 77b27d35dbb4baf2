//! What musterd does about a panic: log it as one ERROR line (message, location, thread) and
//! abort the process. A panic inside an actor would otherwise unwind into the actix arbiter,
//! which drops that actor and carries on: a dead group actor would stay registered, a dead
//! supervisor would leave a server that reports ready and answers nothing. Stopping the
//! process instead lets its supervisor (the container's `restart: unless-stopped`, systemd's
//! `Restart=`) start it again from durable state, which every acknowledged write is in.
//!
//! The hook aborts in every build (the release profile also sets `panic = "abort"`, so no
//! unwinding code is even generated there); tests that run the binary see it exit on SIGABRT.

use std::any::Any;
use std::panic::PanicHookInfo;

/// Replaces the panic hook with [`log_and_abort`]. Call once, after logging is set up.
pub fn install_abort_on_panic() {
    std::panic::set_hook(Box::new(log_and_abort));
}

/// Logs the panic as one ERROR line and aborts the process.
pub fn log_and_abort(info: &PanicHookInfo<'_>) {
    let message = payload_text(info.payload());
    let location = info
        .location()
        .map_or_else(|| "unknown".to_owned(), ToString::to_string);
    let thread = std::thread::current();
    let thread = thread.name().unwrap_or("unnamed");
    if tracing::dispatcher::has_been_set() {
        tracing::error!(
            panic = %muster_coordinator::logsafe(message),
            %location,
            thread,
            "panic; aborting so that the process is restarted from durable state"
        );
    } else {
        eprintln!("musterd: panic at {location} on thread {thread}: {message}; aborting");
    }
    std::process::abort();
}

fn payload_text(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a non-string panic payload)"
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// Set in the environment of the copy of this test binary the test runs as its child.
    const CHILD: &str = "MUSTER_TEST_PANIC_HOOK_CHILD";

    const NAME: &str = "fatal::tests::a_panic_on_any_thread_logs_one_error_line_and_aborts";

    #[test]
    fn a_panic_on_any_thread_logs_one_error_line_and_aborts() {
        if std::env::var_os(CHILD).is_some() {
            // The child: what musterd's main does, then a panic on another thread (as in an
            // actor on a worker arbiter), which must take the whole process down.
            let _ = tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .try_init();
            install_abort_on_panic();
            let worker = std::thread::Builder::new()
                .name("worker-arbiter".into())
                .spawn(|| panic!("boom\nforged line"))
                .expect("spawn");
            let _ = worker.join();
            std::thread::sleep(std::time::Duration::from_secs(10));
            unreachable!("the process should have aborted");
        }
        let exe = std::env::current_exe().expect("the test binary's path");
        let out = Command::new(exe)
            .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("NO_COLOR", "1")
            .output()
            .expect("run the child");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the child survived: {stderr}");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(6), "SIGABRT expected: {stderr}");
        }
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR")).collect();
        assert_eq!(errors.len(), 1, "one ERROR line: {stderr}");
        let line = errors[0];
        assert!(line.contains("boom\\nforged line"), "{line}");
        assert!(line.contains("fatal.rs:"), "the location: {line}");
        assert!(line.contains("worker-arbiter"), "the thread: {line}");
        assert!(!stderr.contains("\nforged line"), "escaped: {stderr}");
    }
}
