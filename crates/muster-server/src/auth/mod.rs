//! Authentication and the rules in force (protocol §5, "Authentication" and "Authorization";
//! docs/security.md). [`Auth`] is what sessions ask: who a Hello's token or client certificate
//! names ([`Auth::authenticate`]), and, after a SIGHUP reload, what that principal may do now
//! ([`Auth::refresh`]). Without an auth file it answers "open" and everything is allowed.
//!
//! - `rules.rs`: the auth file compiled into principals ([`Identity`]), swapped whole on reload;
//! - `failures.rs`: slowing down repeated failed Hellos from one peer address.
//!
//! What a principal may touch is decided where each request is understood: group requests in
//! the session (`session/mod.rs`), topics of offset requests in the engine, admin requests in
//! the supervisor, all through [`muster_coordinator::access::Access`].

mod connections;
mod failures;
mod rules;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use metrics::counter;
use muster_auth::{AuthFile, AuthFileError};
use muster_coordinator::access::Access;
use muster_coordinator::quota::Quotas;

pub use self::connections::{ConnectionCap, ConnectionSlot};
pub use self::failures::Failures;
pub use self::rules::{Identity, RequestRate, Rules};

/// Why a Hello was refused (answered AUTHENTICATION_FAILED; the connection is closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no auth token given")]
    Missing,
    #[error("unknown auth token")]
    Unknown,
    #[error("client certificate names {0:?}, which is no principal of the auth file")]
    UnknownCertificate(String),
    #[error("the token's principal {token:?} is not the client certificate's {certificate:?}")]
    Mismatch { token: String, certificate: String },
}

impl AuthError {
    /// The metrics label.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthError::Missing => "missing_token",
            AuthError::Unknown => "unknown_token",
            AuthError::UnknownCertificate(_) => "unknown_certificate",
            AuthError::Mismatch { .. } => "token_certificate_mismatch",
        }
    }
}

/// What a reload did, for its log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    pub principals: usize,
    pub acls: usize,
}

/// The server's authentication and rules. Shared by every session (`Arc`).
pub struct Auth {
    /// `None`: no auth file, everything open.
    file: Option<PathBuf>,
    rules: RwLock<Arc<Rules>>,
    /// Bumped by every reload; a session compares it with the one it saw (one relaxed load per
    /// request) and refreshes its principal when it moved.
    epoch: AtomicU64,
    quotas: Quotas,
    failures: Mutex<Failures>,
}

impl Auth {
    /// No auth file: every Hello is accepted and may do everything.
    pub fn open(quotas: Quotas) -> Self {
        Auth {
            file: None,
            rules: RwLock::new(Arc::new(Rules::default())),
            epoch: AtomicU64::new(0),
            quotas,
            failures: Mutex::new(Failures::default()),
        }
    }

    /// Loads the auth file at `path`; an error names the line and the reason.
    pub fn from_file(path: &Path, quotas: Quotas) -> Result<Self, AuthFileError> {
        let file = AuthFile::load(path)?;
        let rules = Rules::compile(&file, &quotas, None);
        Ok(Auth {
            file: Some(path.to_owned()),
            rules: RwLock::new(Arc::new(rules)),
            epoch: AtomicU64::new(0),
            quotas,
            failures: Mutex::new(Failures::default()),
        })
    }

    /// Whether an auth file is in force.
    pub fn enabled(&self) -> bool {
        self.file.is_some()
    }

    pub fn path(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The quota table (shared with the coordinator, which charges groups and members).
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn rules(&self) -> Arc<Rules> {
        Arc::clone(&self.rules.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn summary(&self) -> Loaded {
        self.rules().summary()
    }

    /// Rereads the auth file. On any error the rules in force stay as they are.
    pub fn reload(&self) -> Result<Loaded, AuthFileError> {
        let Some(path) = &self.file else {
            return Ok(Loaded {
                principals: 0,
                acls: 0,
            });
        };
        let file = AuthFile::load(path)?;
        let old = self.rules();
        let rules = Rules::compile(&file, &self.quotas, Some(&old));
        let loaded = rules.summary();
        *self.rules.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(rules);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        Ok(loaded)
    }

    /// Who a Hello names. With a verified client certificate its common name is the principal
    /// (a token, if also given, must name the same one); otherwise the token decides.
    pub fn authenticate(
        &self,
        token: Option<&str>,
        certificate_name: Option<&str>,
    ) -> Result<Identity, AuthError> {
        if !self.enabled() {
            return Ok(Identity::open());
        }
        let rules = self.rules();
        let by_token = token.map(|t| rules.by_token(t));
        let result = match (certificate_name, by_token) {
            (Some(name), by_token) => match rules.by_name(name) {
                None => Err(AuthError::UnknownCertificate(name.to_owned())),
                Some(identity) => match by_token {
                    Some(Some(other)) if other.access.name() != name => Err(AuthError::Mismatch {
                        token: other.access.name().to_owned(),
                        certificate: name.to_owned(),
                    }),
                    Some(None) => Err(AuthError::Unknown),
                    _ => Ok(identity),
                },
            },
            (None, None) => Err(AuthError::Missing),
            (None, Some(None)) => Err(AuthError::Unknown),
            (None, Some(Some(identity))) => Ok(identity),
        };
        if let Err(e) = &result {
            counter!("muster_auth_failures_total", "reason" => e.reason()).increment(1);
        }
        result
    }

    /// The identity a principal has now (after a reload): its new grants and rate, or, if the
    /// file no longer declares it, no grants at all (its connections can do nothing more).
    pub fn refresh(&self, current: &Identity) -> Identity {
        match current.access.as_principal() {
            None => current.clone(),
            Some(principal) => {
                let rules = self.rules();
                rules
                    .by_name(principal.name())
                    .unwrap_or_else(|| Identity::revoked(principal.name(), &self.quotas, current))
            }
        }
    }

    /// How long a Hello from `peer` must wait before it is checked, or `None` if it is to be
    /// refused unchecked: repeated failures from one address are slowed down, and a Hello whose
    /// turn is too far away is not queued (`failures.rs`). Takes the Hello's turn.
    pub fn hello_delay(&self, peer: IpAddr, now: Instant) -> Option<Duration> {
        if !self.enabled() {
            return Some(Duration::ZERO);
        }
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .admit(peer, now)
    }

    /// Records a failed Hello from `peer`.
    pub fn hello_failed(&self, peer: IpAddr, now: Instant) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failed(peer, now);
    }
}

impl Default for Auth {
    fn default() -> Self {
        Auth::open(Quotas::default())
    }
}

/// What a session holds: its identity and the epoch it was taken at.
#[derive(Clone)]
pub struct SessionAuth {
    pub identity: Identity,
    epoch: u64,
}

impl SessionAuth {
    pub fn open() -> Self {
        SessionAuth {
            identity: Identity::open(),
            epoch: 0,
        }
    }

    /// `epoch` must be read ([`Auth::epoch`]) *before* the rules that made `identity`: a reload
    /// in between then shows as a newer epoch at the next request, which looks the identity up
    /// again. Read after, it could hide the reload for good.
    pub fn new(identity: Identity, epoch: u64) -> Self {
        SessionAuth { identity, epoch }
    }

    /// Takes a reload into account; returns whether the identity changed.
    pub fn refresh(&mut self, auth: &Auth) -> bool {
        // Open access never changes (an auth file is not added by a reload): no atomic load.
        if self.identity.access.is_open() {
            return false;
        }
        let epoch = auth.epoch();
        if epoch == self.epoch {
            return false;
        }
        self.identity = auth.refresh(&self.identity);
        self.epoch = epoch;
        true
    }

    pub fn access(&self) -> &Access {
        &self.identity.access
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use muster_auth::TokenHash;
    use muster_coordinator::access::{Operation, ResourceType};

    use super::*;

    fn file(dir: &tempfile::TempDir, principals: &[&str]) -> PathBuf {
        let path = dir.path().join("auth.toml");
        let mut text = String::new();
        for name in principals {
            text.push_str(&format!(
                "[[principals]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\nmax_requests_per_s = 10\n\
                 [[acls]]\nprincipal = \"{name}\"\nresource = \"group\"\npattern = \"*\"\n\
                 operations = [\"read\"]\n",
                TokenHash::of(&format!("{name}-token")).to_hex()
            ));
        }
        std::fs::write(&path, text).expect("write auth file");
        path
    }

    #[test]
    fn a_reload_reaches_a_session_at_its_next_look_and_a_revoked_principal_keeps_its_rate() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = file(&dir, &["a", "b"]);
        let auth = Auth::from_file(&path, Quotas::default()).expect("auth file");
        let epoch = auth.epoch();
        let identity = auth.authenticate(Some("a-token"), None).expect("a");
        let rate = identity.rate.clone().expect("a has a rate");
        let mut session = SessionAuth::new(identity, epoch);
        assert!(!session.refresh(&auth), "nothing changed");
        assert!(session
            .access()
            .allows(ResourceType::Group, "g", Operation::Read));

        file(&dir, &["b"]);
        auth.reload().expect("reload");
        assert!(session.refresh(&auth), "the reload is seen");
        assert!(!session
            .access()
            .allows(ResourceType::Group, "g", Operation::Read));
        let kept = session
            .identity
            .rate
            .clone()
            .expect("a revoked principal keeps a rate");
        assert!(Arc::ptr_eq(&rate, &kept));
        assert_eq!(
            auth.authenticate(Some("a-token"), None).map(|_| ()),
            Err(AuthError::Unknown)
        );
    }

    #[test]
    fn an_epoch_read_before_a_reload_makes_the_session_look_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = file(&dir, &["a"]);
        let auth = Auth::from_file(&path, Quotas::default()).expect("auth file");
        // A Hello reads the epoch, then (old) rules; a reload lands in between.
        let epoch = auth.epoch();
        let identity = auth.authenticate(Some("a-token"), None).expect("a");
        file(&dir, &[]);
        auth.reload().expect("reload");
        let mut session = SessionAuth::new(identity, epoch);
        assert!(
            session.refresh(&auth),
            "the older epoch makes it look again"
        );
        assert!(!session
            .access()
            .allows(ResourceType::Group, "g", Operation::Read));
    }
}
