//! etcd authentication (the `Authenticate` RPC of `etcdserverpb.Auth`): the token this client
//! holds, put as `token` metadata on every request, and getting a new one when etcd says the
//! one held is no good.
//!
//! A token stops being good when etcd's `--auth-token-ttl` passes without it being used
//! (simple tokens, 300 s by default), when the member that knows it restarts, when a JWT
//! expires, or when the auth store changes (a role or user edited: "revision of auth store is
//! old"). Each shows as a refusal of a request; the client then authenticates again, once for
//! every client sharing the token (a generation number tells a refresh already made by another
//! request), and sends the request again. If etcd answers that authentication is not enabled,
//! requests go without a token (and the client authenticates as soon as etcd asks for one):
//! credentials can be deployed before `etcdctl auth enable`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Channel;
use tonic::Code;

use crate::generated::etcdserverpb::auth_client::AuthClient;
use crate::generated::etcdserverpb::AuthenticateRequest;
use crate::security::EtcdCredentials;

/// The metadata key etcd reads the token from.
const TOKEN_KEY: &str = "token";

/// What an etcd refusal means for authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The token is unknown, expired, or older than the auth store: authenticate again.
    StaleToken,
    /// Authentication is on and the request carried no token (and no client certificate
    /// user).
    NoUser,
    /// The user (or password) is wrong.
    BadCredentials,
    /// The user's roles do not allow the request.
    PermissionDenied,
    /// Authentication is not enabled in etcd.
    NotEnabled,
    /// Nothing to do with authentication.
    Other,
}

/// Reads a refusal by etcd's codes and messages (`etcdserver/api/v3rpc/rpctypes`).
pub(crate) fn classify(status: &tonic::Status) -> Refusal {
    let message = status.message();
    match status.code() {
        Code::Unauthenticated => Refusal::StaleToken,
        Code::PermissionDenied => Refusal::PermissionDenied,
        Code::FailedPrecondition if message.contains("authentication is not enabled") => {
            Refusal::NotEnabled
        }
        Code::InvalidArgument if message.contains("revision of auth store is old") => {
            Refusal::StaleToken
        }
        Code::InvalidArgument if message.contains("user name is empty") => Refusal::NoUser,
        Code::InvalidArgument if message.contains("authentication failed") => {
            Refusal::BadCredentials
        }
        _ => Refusal::Other,
    }
}

/// Whether a watch's cancel reason (etcd's error as text) may be cured by authenticating
/// again: a token etcd no longer knows or that predates the auth store, no token, or a
/// permission refusal (which etcd 3.4 also gives for some token failures).
pub(crate) fn refused_for_authentication(reason: &str) -> bool {
    [
        "invalid auth token",
        "revision of auth store is old",
        "user name is empty",
        "permission denied",
    ]
    .iter()
    .any(|known| reason.contains(known))
}

/// The token requests carry now, and which refresh it came from.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    pub token: Option<AsciiMetadataValue>,
    pub generation: u64,
    /// Credentials are set and no token is held: authenticate before sending.
    pub must_authenticate: bool,
}

#[derive(Debug, Default)]
struct State {
    token: Option<AsciiMetadataValue>,
    generation: u64,
    must_authenticate: bool,
}

/// The shared authentication state of one client (and its clones).
#[derive(Debug)]
pub(crate) struct Authenticator {
    credentials: Option<EtcdCredentials>,
    state: Mutex<State>,
    /// One authentication at a time: requests refused together wait for the first one's.
    refresh: tokio::sync::Mutex<()>,
    warned_not_enabled: AtomicBool,
}

/// Why authenticating failed.
#[derive(Debug)]
pub(crate) enum AuthenticateError {
    /// etcd refused or could not be asked (the status says which).
    Status(tonic::Status),
    /// etcd's token cannot be sent as metadata (never seen: tokens are ASCII).
    BadToken,
}

impl Authenticator {
    pub fn new(credentials: Option<EtcdCredentials>) -> Self {
        let must_authenticate = credentials.is_some();
        Authenticator {
            credentials,
            state: Mutex::new(State {
                must_authenticate,
                ..State::default()
            }),
            refresh: tokio::sync::Mutex::new(()),
            warned_not_enabled: AtomicBool::new(false),
        }
    }

    pub fn user(&self) -> Option<&str> {
        self.credentials.as_ref().map(EtcdCredentials::user)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Plain data, consistent after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn current(&self) -> Current {
        let state = self.state();
        Current {
            token: state.token.clone(),
            generation: state.generation,
            must_authenticate: state.must_authenticate,
        }
    }

    /// Marks the token of `generation` as no good (unless a newer one replaced it meanwhile):
    /// the next request authenticates first. Whether there are credentials to do it with.
    pub fn invalidate(&self, generation: u64) -> bool {
        if self.credentials.is_none() {
            return false;
        }
        let mut state = self.state();
        if state.generation == generation {
            state.must_authenticate = true;
        }
        true
    }

    /// Authenticates on `channel` if the token of `generation` is still the one to replace.
    pub async fn authenticate(
        &self,
        channel: Channel,
        generation: u64,
    ) -> Result<(), AuthenticateError> {
        let Some(credentials) = &self.credentials else {
            return Ok(());
        };
        let _one_at_a_time = self.refresh.lock().await;
        {
            let state = self.state();
            if state.generation != generation || !state.must_authenticate {
                // Another request authenticated while this one waited.
                return Ok(());
            }
        }
        let request = AuthenticateRequest {
            name: credentials.user().to_owned(),
            password: credentials.password().to_owned(),
        };
        let token = match AuthClient::new(channel).authenticate(request).await {
            Ok(response) => {
                let token = AsciiMetadataValue::try_from(response.into_inner().token)
                    .map_err(|_| AuthenticateError::BadToken)?;
                Some(token)
            }
            Err(status) if classify(&status) == Refusal::NotEnabled => {
                if !self.warned_not_enabled.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        user = credentials.user(),
                        "etcd user configured but etcd has authentication disabled: \
                         requests go without a token until etcd asks for one"
                    );
                }
                None
            }
            Err(status) => return Err(AuthenticateError::Status(status)),
        };
        let mut state = self.state();
        state.token = token;
        state.generation += 1;
        state.must_authenticate = false;
        Ok(())
    }
}

/// Puts the token on a request's metadata (tonic's interceptor over each channel).
#[derive(Debug, Clone)]
pub(crate) struct TokenInterceptor(pub Option<AsciiMetadataValue>);

impl tonic::service::Interceptor for TokenInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.0 {
            request.metadata_mut().insert(TOKEN_KEY, token.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::{classify, Refusal};
    use tonic::{Code, Status};

    /// etcd 3.4's refusals, as `rpctypes` spells them.
    #[test]
    fn etcd_refusals_are_told_apart() {
        let cases = [
            (
                Code::Unauthenticated,
                "etcdserver: invalid auth token",
                Refusal::StaleToken,
            ),
            (
                Code::InvalidArgument,
                "etcdserver: revision of auth store is old",
                Refusal::StaleToken,
            ),
            (
                Code::InvalidArgument,
                "etcdserver: user name is empty",
                Refusal::NoUser,
            ),
            (
                Code::InvalidArgument,
                "etcdserver: authentication failed, invalid user ID or password",
                Refusal::BadCredentials,
            ),
            (
                Code::PermissionDenied,
                "etcdserver: permission denied",
                Refusal::PermissionDenied,
            ),
            (
                Code::FailedPrecondition,
                "etcdserver: authentication is not enabled",
                Refusal::NotEnabled,
            ),
            (
                Code::InvalidArgument,
                "etcdserver: key is not provided",
                Refusal::Other,
            ),
            (Code::Unavailable, "connection refused", Refusal::Other),
        ];
        for (code, message, refusal) in cases {
            assert_eq!(classify(&Status::new(code, message)), refusal, "{message}");
        }
    }

    /// A watch's cancel reason as etcd 3.4 writes it for an expired token.
    #[test]
    fn watch_refusals_for_the_token_are_recognised() {
        assert!(super::refused_for_authentication(
            "rpc error: code = Unauthenticated desc = etcdserver: invalid auth token"
        ));
        assert!(!super::refused_for_authentication(
            "mvcc: required revision has been compacted"
        ));
    }
}
