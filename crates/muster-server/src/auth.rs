//! The authentication seam (protocol §1 "Authentication"). Today every connection is allowed;
//! a token-checking [`Authenticator`] plugs in here without touching the session code.

/// Why a Hello was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no auth token given")]
    Missing,
    #[error("unknown auth token")]
    Unknown,
}

/// Decides whether a Hello's `auth_token` may open a session.
pub trait Authenticator: Send + Sync + 'static {
    fn authenticate(&self, token: Option<&str>) -> Result<(), AuthError>;
}

/// No authentication configured: every Hello is accepted.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAll;

impl Authenticator for AllowAll {
    fn authenticate(&self, _token: Option<&str>) -> Result<(), AuthError> {
        Ok(())
    }
}
