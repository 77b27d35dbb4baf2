//! Freezing a worker without killing it: SIGSTOP, then SIGCONT. A paused worker keeps its
//! sockets, its memory and its belief that it owns its partitions, but says nothing; paused
//! past its session it comes back as a zombie (a long GC pause, a VM migration, a laptop lid).
//! (Linux: the process's state is read from `/proc` to know the signal has taken effect.)

use std::process::Command;
use std::time::{Duration, Instant};

use super::{now_us, Fleet};

impl Fleet {
    /// SIGSTOP, and waits until the kernel reports the worker stopped. Returns the instant
    /// (µs) after that: the worker does nothing from then until [`Fleet::resume`]'s instant.
    pub fn pause(&mut self, name: &str) -> u64 {
        self.signal(name, "-STOP", true);
        now_us()
    }

    /// SIGCONT, and waits until the kernel reports the worker running. Returns the instant
    /// (µs) before the signal was sent (the worker may have run a while when this returns).
    pub fn resume(&mut self, name: &str) -> u64 {
        let at = now_us();
        self.signal(name, "-CONT", false);
        at
    }

    fn signal(&mut self, name: &str, signal: &str, stopped: bool) {
        let worker = self.worker(name);
        assert!(worker.end.is_none(), "{name} is running");
        let pid = worker.child.id().to_string();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill {signal} {pid}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_stopped(&pid) != stopped {
            assert!(
                Instant::now() < deadline,
                "{name} (pid {pid}) not {} after kill {signal}",
                if stopped { "stopped" } else { "running" }
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether `/proc/<pid>/stat` says the process is stopped by a signal (`T`).
fn is_stopped(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // `pid (comm) state ...`: the command may hold spaces and parentheses; the last `)` ends it.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    state == Some("T")
}
