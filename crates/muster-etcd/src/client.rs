//! A thin etcd v3 KV client over the generated gRPC stubs: one lazily connected channel per
//! endpoint (TLS when configured), a timeout on every request, failover to the next endpoint
//! when one is unreachable or times out, ranges read page by page at one revision, and the
//! etcd token on every request (`auth.rs`: authenticated on first use and again when etcd
//! refuses the token, on whichever member the request is at).
//!
//! Failover retries a request on another member. That is safe for everything this crate
//! sends, even when the first attempt did land: reads, and transactions of plain puts and
//! deletes conditioned on ownership, give the same result applied twice in a row. (tonic's
//! `balance_list` was tried first: it keeps routing some requests to a dead member.)

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use crate::auth::{AuthenticateError, Authenticator, Refusal, TokenInterceptor};
use crate::error::EtcdError;
use crate::generated::etcdserverpb::kv_client::KvClient;
use crate::generated::etcdserverpb::{
    DeleteRangeRequest, PutRequest, RangeRequest, TxnRequest, TxnResponse,
};
use crate::generated::mvccpb::KeyValue;
use crate::keys::prefix_end;
use crate::security::{EtcdSecurity, EtcdTls};

/// Keys per page of a range: well under tonic's 4 MiB response limit for Muster's values.
const PAGE: i64 = 500;

/// A channel to one member that puts the current token on every request.
pub(crate) type AuthedChannel = InterceptedService<Channel, TokenInterceptor>;

/// How [`EtcdClient::connect_with`] connects.
#[derive(Debug, Clone)]
pub struct EtcdClientOptions {
    /// How long a request keeps trying members.
    pub request_timeout: Duration,
    /// TLS and credentials (none by default).
    pub security: EtcdSecurity,
    /// The key prefix the client works under (`/<cluster>/`), named when etcd denies access.
    pub key_prefix: String,
}

impl EtcdClientOptions {
    /// No TLS, no user, and `/` as the prefix named in errors.
    pub fn new(request_timeout: Duration) -> Self {
        EtcdClientOptions {
            request_timeout,
            security: EtcdSecurity::default(),
            key_prefix: "/".into(),
        }
    }
}

/// A connection to an etcd cluster (cheap to clone; clones share the channel and the token).
#[derive(Debug, Clone)]
pub struct EtcdClient {
    members: Arc<[Channel]>,
    /// The member that answered last: requests start there.
    preferred: Arc<AtomicUsize>,
    /// How long a request keeps trying members (an etcd leader election takes about one
    /// election timeout, 1 s by default: requests ride it out rather than fail).
    request_timeout: Duration,
    auth: Arc<Authenticator>,
    key_prefix: Arc<str>,
    /// Whether the endpoints speak TLS (errors then say how a refused certificate shows).
    tls: bool,
}

/// The shortest time one attempt at a request gets.
const MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_millis(250);

/// Pause between rounds over all members.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Authentications one attempt may make before its refusal stands: a token refused right
/// after it was issued means something else is wrong.
const MAX_REAUTHENTICATIONS: u32 = 2;

/// Whether a failed request should be tried on another member: it could not reach this one,
/// or this one did not answer in time (cut off, paused, or without a leader).
fn try_elsewhere(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
    )
}

/// How one attempt at a member ended without an answer.
enum Failure {
    /// The member could not be reached or did not answer: try the next one.
    Elsewhere(tonic::Status),
    /// An answer that holds on every member.
    Final(EtcdError),
}

/// `endpoint` as a URL with the scheme the TLS settings call for: `https://` with TLS (a bare
/// `host:port` gets it), `http://` without; a scheme at odds with the settings is refused.
fn endpoint_url(endpoint: &str, tls: bool) -> Result<String, EtcdError> {
    let invalid = |reason: &str| EtcdError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
        reason: reason.into(),
    };
    match endpoint.split_once("://") {
        None if tls => Ok(format!("https://{endpoint}")),
        None => Ok(format!("http://{endpoint}")),
        Some(("https", _)) if tls => Ok(endpoint.to_owned()),
        Some(("https", _)) => Err(invalid(
            "an https:// endpoint needs the CA that signed etcd's certificate (the etcd CA setting)",
        )),
        Some(("http", _)) if tls => Err(invalid(
            "TLS to etcd is configured (an etcd CA is given) but this endpoint is http://: \
             use https://",
        )),
        Some(("http", _)) => Ok(endpoint.to_owned()),
        Some(_) => Err(invalid("expected http://, https:// or no scheme")),
    }
}

/// One member's endpoint, TLS and timeouts set.
fn endpoint(
    endpoint: &str,
    tls: Option<&EtcdTls>,
    attempt_timeout: Duration,
) -> Result<Endpoint, EtcdError> {
    let url = endpoint_url(endpoint, tls.is_some())?;
    let invalid = |reason: String| EtcdError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let mut parsed = Endpoint::from_shared(url).map_err(|e| invalid(e.to_string()))?;
    if let Some(tls) = tls {
        parsed = parsed
            .tls_config(tls.client_config())
            .map_err(|e| invalid(format!("TLS: {e}")))?;
    }
    Ok(parsed
        .connect_timeout(attempt_timeout)
        .timeout(attempt_timeout)
        .tcp_nodelay(true))
}

impl EtcdClient {
    /// Connects lazily to `endpoints` (`http://host:port` or `host:port`), no TLS, no user; a
    /// request fails only if no member answers. Must be called inside a tokio runtime
    /// (channels spawn their connection tasks there).
    pub fn connect(endpoints: &[String], request_timeout: Duration) -> Result<Self, EtcdError> {
        Self::connect_with(endpoints, &EtcdClientOptions::new(request_timeout))
    }

    /// [`EtcdClient::connect`] with TLS and credentials: with TLS, endpoints are
    /// `https://host:port` (or `host:port`); with credentials, the first request authenticates.
    /// Nothing is sent yet: a wrong password or an untrusted certificate shows at the first
    /// request.
    pub fn connect_with(
        endpoints: &[String],
        options: &EtcdClientOptions,
    ) -> Result<Self, EtcdError> {
        if endpoints.is_empty() {
            return Err(EtcdError::NoEndpoints);
        }
        // One attempt gets a quarter of the request's time: etcd holds a request whose
        // proposal died with its leader until its own timeout, while a new leader is usually
        // elected within a second; the retry on the next member gets through.
        let attempt_timeout = (options.request_timeout / 4).max(MIN_ATTEMPT_TIMEOUT);
        let tls = options.security.tls.as_ref();
        let parsed = endpoints
            .iter()
            .map(|e| endpoint(e, tls, attempt_timeout))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EtcdClient {
            members: parsed
                .into_iter()
                .map(|endpoint| endpoint.connect_lazy())
                .collect(),
            preferred: Arc::new(AtomicUsize::new(0)),
            request_timeout: options.request_timeout,
            auth: Arc::new(Authenticator::new(options.security.credentials.clone())),
            key_prefix: Arc::from(options.key_prefix.as_str()),
            tls: tls.is_some(),
        })
    }

    /// Runs `request` on the preferred member, then on each other one while they are
    /// unreachable, round after round until the request timeout has passed; the last error
    /// if none answered by then.
    pub(crate) async fn call<T, F, Fut>(&self, request: F) -> Result<T, EtcdError>
    where
        F: Fn(AuthedChannel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.call_within(None, request).await
    }

    /// [`EtcdClient::call`] with each attempt at a member cut short after `attempt` (when
    /// shorter than the connection's own attempt timeout): for requests that must not spend
    /// long on a member that stopped answering (lease renewals, against a lease TTL).
    pub(crate) async fn call_within<T, F, Fut>(
        &self,
        attempt: Option<Duration>,
        request: F,
    ) -> Result<T, EtcdError>
    where
        F: Fn(AuthedChannel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let count = self.members.len();
        let first = self.preferred.load(Ordering::Relaxed) % count.max(1);
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let mut last = None;
        loop {
            for step in 0..count {
                let index = (first + step) % count;
                match self.attempt(index, attempt, &request).await {
                    Ok(response) => {
                        self.preferred.store(index, Ordering::Relaxed);
                        return Ok(response);
                    }
                    Err(Failure::Elsewhere(status)) => {
                        tracing::debug!(member = index, %status, "etcd member did not answer");
                        last = Some(status);
                    }
                    Err(Failure::Final(error)) => return Err(error),
                }
            }
            if count == 0 || tokio::time::Instant::now() + RETRY_PAUSE >= deadline {
                return Err(
                    last.map_or(EtcdError::NoEndpoints, |status| EtcdError::Unreachable {
                        status,
                        tls: self.tls,
                    }),
                );
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// One attempt at member `index`: authenticates there first when no token is held, and
    /// again (then sends the request again) when etcd refuses the token.
    async fn attempt<T, F, Fut>(
        &self,
        index: usize,
        attempt: Option<Duration>,
        request: &F,
    ) -> Result<T, Failure>
    where
        F: Fn(AuthedChannel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let channel = &self.members[index];
        let mut reauthentications = 0;
        loop {
            let current = self.auth.current();
            if current.must_authenticate {
                self.authenticate(channel.clone(), current.generation, attempt)
                    .await?;
                continue;
            }
            let authed = InterceptedService::new(channel.clone(), TokenInterceptor(current.token));
            let answer = match attempt {
                None => request(authed).await,
                Some(limit) => tokio::time::timeout(limit, request(authed))
                    .await
                    .unwrap_or_else(|_| {
                        Err(tonic::Status::deadline_exceeded(
                            "no answer within the attempt",
                        ))
                    }),
            };
            let status = match answer {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if try_elsewhere(&status) => return Err(Failure::Elsewhere(status)),
                Err(status) => status,
            };
            match crate::auth::classify(&status) {
                Refusal::StaleToken | Refusal::NoUser
                    if reauthentications < MAX_REAUTHENTICATIONS
                        && self.auth.invalidate(current.generation) =>
                {
                    reauthentications += 1;
                    tracing::info!(member = index, %status, "etcd refused the token: authenticating again");
                }
                refusal => return Err(Failure::Final(self.refused(status, refusal))),
            }
        }
    }

    /// Authenticates on `channel` (one attempt), unless another request just did.
    async fn authenticate(
        &self,
        channel: Channel,
        generation: u64,
        attempt: Option<Duration>,
    ) -> Result<(), Failure> {
        let authenticate = self.auth.authenticate(channel, generation);
        let outcome = match attempt {
            None => authenticate.await,
            Some(limit) => tokio::time::timeout(limit, authenticate)
                .await
                .unwrap_or_else(|_| {
                    Err(AuthenticateError::Status(tonic::Status::deadline_exceeded(
                        "no answer to Authenticate within the attempt",
                    )))
                }),
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(AuthenticateError::Status(status)) if try_elsewhere(&status) => {
                Err(Failure::Elsewhere(status))
            }
            Err(AuthenticateError::Status(status)) => {
                let refusal = crate::auth::classify(&status);
                Err(Failure::Final(self.refused(status, refusal)))
            }
            Err(AuthenticateError::BadToken) => Err(Failure::Final(EtcdError::Status(
                tonic::Status::internal("etcd issued a token that is not ASCII"),
            ))),
        }
    }

    /// The error a refusal is reported as: authentication problems say what to fix.
    fn refused(&self, status: tonic::Status, refusal: Refusal) -> EtcdError {
        match refusal {
            Refusal::BadCredentials => EtcdError::AuthFailed {
                user: self.auth.user().unwrap_or_default().to_owned(),
            },
            Refusal::NoUser if self.auth.user().is_none() => EtcdError::AuthRequired,
            Refusal::PermissionDenied => EtcdError::PermissionDenied {
                who: match self.auth.user() {
                    Some(user) => format!("etcd user {user:?}"),
                    None => "the etcd user of this client (none is configured: etcd takes \
                             the client certificate's common name, if any)"
                        .to_owned(),
                },
                prefix: self.key_prefix.to_string(),
            },
            _ => EtcdError::Status(status),
        }
    }

    /// How many times this client (and its clones) authenticated: tests see a re-authentication.
    #[cfg(test)]
    pub(crate) fn authentications(&self) -> u64 {
        self.auth.current().generation
    }

    /// Makes the next request authenticate first (a watch refused for its token: etcd says
    /// so in the watch's cancel reason, not in a status the request loop would see).
    pub(crate) fn reauthenticate(&self) -> bool {
        self.auth.invalidate(self.auth.current().generation)
    }

    /// The refusal of a watch, reported like that of any other request.
    pub(crate) fn watch_refused(&self, reason: &str) -> EtcdError {
        let status = tonic::Status::permission_denied(reason.to_owned());
        if reason.contains("permission denied") {
            self.refused(status, Refusal::PermissionDenied)
        } else if reason.contains("user name is empty") {
            self.refused(status, Refusal::NoUser)
        } else {
            EtcdError::Status(tonic::Status::failed_precondition(format!(
                "etcd refused the watch: {reason}"
            )))
        }
    }

    /// Every key under `prefix` at `revision` (0: the latest), in key order, and the revision
    /// read (pass it back to read more at the same point in time).
    pub async fn range_prefix(
        &self,
        prefix: &[u8],
        revision: i64,
    ) -> Result<(Vec<KeyValue>, i64), EtcdError> {
        let end = prefix_end(prefix);
        let mut start = prefix.to_vec();
        let mut revision = revision;
        let mut out = Vec::new();
        loop {
            let request = RangeRequest {
                key: start.clone(),
                range_end: end.clone(),
                limit: PAGE,
                revision,
                ..RangeRequest::default()
            };
            let response = self.kv_range(&request).await?;
            if revision == 0 {
                revision = response.header.as_ref().map_or(0, |h| h.revision);
            }
            let more = response.more;
            if let Some(last) = response.kvs.last() {
                // The next page starts just after the last key read.
                start = last.key.clone();
                start.push(0);
            }
            out.extend(response.kvs);
            if !more {
                return Ok((out, revision));
            }
        }
    }

    /// One key at `revision` (0: the latest), as a list of zero or one, and the revision read.
    pub async fn range_exact(
        &self,
        key: &[u8],
        revision: i64,
    ) -> Result<(Vec<KeyValue>, i64), EtcdError> {
        let request = RangeRequest {
            key: key.to_vec(),
            revision,
            ..RangeRequest::default()
        };
        let response = self.kv_range(&request).await?;
        let revision = response.header.as_ref().map_or(revision, |h| h.revision);
        Ok((response.kvs, revision))
    }

    /// One key at the latest revision.
    pub async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>, EtcdError> {
        let (kvs, _) = self.range_exact(key, 0).await?;
        Ok(kvs.into_iter().next())
    }

    /// Puts one key; returns the revision it was written at (its new mod revision).
    pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<i64, EtcdError> {
        let request = PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            ..PutRequest::default()
        };
        let response = self
            .call(|channel| {
                let request = request.clone();
                async move { KvClient::new(channel).put(request).await }
            })
            .await?;
        Ok(response.header.map_or(0, |h| h.revision))
    }

    /// Deletes every key under `prefix`; returns how many there were.
    pub async fn delete_prefix(&self, prefix: &[u8]) -> Result<i64, EtcdError> {
        let request = DeleteRangeRequest {
            key: prefix.to_vec(),
            range_end: prefix_end(prefix),
            ..DeleteRangeRequest::default()
        };
        let response = self.kv_delete_range(&request).await?;
        Ok(response.deleted)
    }

    /// Deletes exactly `key` (no prefix); returns whether it existed.
    pub async fn delete(&self, key: &[u8]) -> Result<bool, EtcdError> {
        let request = DeleteRangeRequest {
            key: key.to_vec(),
            ..DeleteRangeRequest::default()
        };
        let response = self.kv_delete_range(&request).await?;
        Ok(response.deleted > 0)
    }

    /// One range request (a page, or one key), on whichever member answers.
    async fn kv_range(
        &self,
        request: &RangeRequest,
    ) -> Result<crate::generated::etcdserverpb::RangeResponse, EtcdError> {
        self.call(|channel| {
            let request = request.clone();
            async move { KvClient::new(channel).range(request).await }
        })
        .await
    }

    /// One delete request (a key, or a prefix), on whichever member answers.
    async fn kv_delete_range(
        &self,
        request: &DeleteRangeRequest,
    ) -> Result<crate::generated::etcdserverpb::DeleteRangeResponse, EtcdError> {
        self.call(|channel| {
            let request = request.clone();
            async move { KvClient::new(channel).delete_range(request).await }
        })
        .await
    }

    /// One transaction.
    pub async fn txn(&self, request: TxnRequest) -> Result<TxnResponse, EtcdError> {
        self.call(|channel| {
            let request = request.clone();
            async move { KvClient::new(channel).txn(request).await }
        })
        .await
    }
}
