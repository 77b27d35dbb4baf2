//! The coordinator's clock: milliseconds since the Unix epoch at startup, advanced by a
//! monotonic clock, so time never goes backwards while the process runs and commit timestamps
//! still mean something after a restart. Only the actors read it; the engine is handed `now`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::types::Millis;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    origin_ms: Millis,
}

impl Clock {
    pub fn new() -> Self {
        let origin_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as Millis);
        Self {
            origin: Instant::now(),
            origin_ms,
        }
    }

    /// Now, in coordinator milliseconds.
    pub fn now(&self) -> Millis {
        self.origin_ms + self.origin.elapsed().as_millis() as Millis
    }

    /// The instant at which the clock reads `at`.
    pub fn instant_at(&self, at: Millis) -> Instant {
        self.origin + Duration::from_millis(at.saturating_sub(self.origin_ms))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
