//! [`ConnectionLimits`]: what one connection may hold or keep waiting, on the client port (the
//! session's writer) and on the admin listener. Set from the settings (`config.rs`), carried
//! by `ServerOptions`, and turned by each side into the limits it applies (`WriterLimits` in
//! `session/writer.rs`, `AdminLimits` in `admin.rs`).

use std::time::Duration;

/// Limits on what one connection can hold or keep waiting (`docs/operations.md`, "Limits and
/// bad clients").
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Unwritten answers at which a connection stops being read (twice this closes it).
    pub max_buffered_response_bytes: usize,
    /// A client that takes no byte for this long is disconnected.
    pub write_timeout: Duration,
    /// Requests with possibly large answers (OffsetFetch, DescribeGroups, ListGroups,
    /// DescribeTopics) a connection may have in flight; at it the connection stops being read.
    pub max_in_flight_large: usize,
    /// Admin HTTP connections open at once.
    pub admin_max_connections: usize,
    /// An admin connection's whole life: headers in, answer out.
    pub admin_timeout: Duration,
}

impl Default for ConnectionLimits {
    /// The settings' defaults (`config.rs`).
    fn default() -> Self {
        Self {
            max_buffered_response_bytes: 16 << 20,
            write_timeout: Duration::from_secs(60),
            max_in_flight_large: 8,
            admin_max_connections: 32,
            admin_timeout: Duration::from_secs(10),
        }
    }
}
