//! A listener's TLS configuration that a reload replaces (SIGHUP, `TlsSettings::reload`): each
//! handshake takes the configuration in force when it starts; sessions already established
//! keep theirs, so replacing a certificate drops no connection.

use std::sync::{Arc, PoisonError, RwLock};

use rustls::ServerConfig;

/// The configuration in force, shared by every clone.
#[derive(Clone)]
pub struct Current(Arc<RwLock<Arc<ServerConfig>>>);

impl Current {
    pub(super) fn new(config: ServerConfig) -> Self {
        Current(Arc::new(RwLock::new(Arc::new(config))))
    }

    /// The configuration for a handshake starting now (a read lock per connection, not per
    /// request).
    pub fn get(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.0.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(super) fn replace(&self, config: ServerConfig) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }
}
