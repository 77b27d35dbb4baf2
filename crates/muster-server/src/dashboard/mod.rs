//! The dashboard on the admin listener (docs/operations.md, "Dashboard"): the pages (`/`, the
//! group list; `/groups/<id>`, one group) and the JSON behind them (`/api/groups`,
//! `/api/groups/<id>`), and in a cluster the keys in etcd held back as undecodable
//! (`/api/quarantine`, `quarantine.rs`). The pages are plain HTML, CSS and JavaScript embedded in the binary
//! (`index.html`, `dashboard.css`, `dashboard.js` beside this file): no build step, nothing
//! fetched from elsewhere. The script fetches the JSON and builds the page with `textContent`
//! only, so group ids, client ids and hosts (chosen by clients) are never markup; every answer
//! carries a Content-Security-Policy that allows this origin's script and style only.
//!
//! Read-only, and it shows what DescribeGroups and ListGroups show to the same principal
//! (`api.rs` asks the supervisor exactly those questions). Without an auth file that is
//! everything, as on the client port. With one, the JSON needs `Authorization: Bearer
//! <token>` of a principal of the file (the page asks for it and keeps it in the tab's
//! session storage), and shows only the groups that principal may `describe`; failed tokens are
//! spaced out per address like failed Hellos (docs/security.md).

mod api;
mod ask;
mod consumer;
mod http;
mod insight;
mod quarantine;

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use actix::Addr;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use muster_coordinator::access::Access;
use muster_coordinator::actors::Supervisor;

use self::ask::Backend;
use self::http::{json_error, page, percent_decode};
use crate::admin_gate::AdminGate;
use crate::auth::Auth;
use crate::cluster::placement::ShardTable;

const INDEX_HTML: &str = include_str!("index.html");
const DASHBOARD_CSS: &str = include_str!("dashboard.css");
const DASHBOARD_JS: &str = include_str!("dashboard.js");

/// What the dashboard answers from: the supervisor and the server's admin gate (set once the
/// supervisor runs; until then the JSON is 503) and the server's authentication.
pub struct Dashboard {
    backend: OnceLock<Backend>,
    auth: Arc<Auth>,
    /// A cluster node's shard table (its quarantine); unset on a single node.
    shards: OnceLock<Arc<ShardTable>>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("connected", &self.backend.get().is_some())
            .field("auth", &self.auth.enabled())
            .finish()
    }
}

impl Dashboard {
    pub fn new(auth: Arc<Auth>) -> Arc<Self> {
        Arc::new(Dashboard {
            backend: OnceLock::new(),
            auth,
            shards: OnceLock::new(),
        })
    }

    /// The supervisor is up: the JSON can be answered. Its admin requests pass `gate`, the
    /// one the client connections' pass.
    pub fn connect(&self, supervisor: Addr<Supervisor>, gate: AdminGate) {
        let _ = self.backend.set(Backend { supervisor, gate });
    }

    /// A cluster node: `/api/quarantine` answers from `table`'s quarantine.
    pub fn watch_shards(&self, table: Arc<ShardTable>) {
        let _ = self.shards.set(table);
    }

    /// Answers a GET of `path` (any path the admin listener does not serve itself).
    pub async fn serve(&self, req: &Request<Incoming>, peer: IpAddr) -> Response<Full<Bytes>> {
        let path = req.uri().path();
        match path {
            "/" | "/index.html" => page(INDEX_HTML, "text/html; charset=utf-8"),
            "/assets/dashboard.css" => page(DASHBOARD_CSS, "text/css; charset=utf-8"),
            "/assets/dashboard.js" => page(DASHBOARD_JS, "text/javascript; charset=utf-8"),
            _ if path.starts_with("/groups/") => page(INDEX_HTML, "text/html; charset=utf-8"),
            _ if path == "/api" || path.starts_with("/api/") => self.api(req, peer).await,
            _ => json_error(StatusCode::NOT_FOUND, "not found"),
        }
    }

    async fn api(&self, req: &Request<Incoming>, peer: IpAddr) -> Response<Full<Bytes>> {
        let Some(backend) = self.backend.get() else {
            return json_error(StatusCode::SERVICE_UNAVAILABLE, "the server is starting");
        };
        let access = match self.access(req, peer).await {
            Ok(access) => access,
            Err(response) => return response,
        };
        let path = req.uri().path();
        let query = req.uri().query().unwrap_or("");
        if path == "/api/groups" {
            return api::list(backend, access, query).await;
        }
        if path == "/api/quarantine" {
            return quarantine::answer(self.shards.get().map(Arc::as_ref), &access);
        }
        let Some(encoded) = path.strip_prefix("/api/groups/") else {
            return json_error(StatusCode::NOT_FOUND, "not found");
        };
        // `/api/groups/<id>`: the id is one percent-encoded path segment (a `/` in an id is
        // `%2F`), so a literal `/` after it is another resource.
        if encoded.contains('/') {
            return json_error(StatusCode::NOT_FOUND, "not found");
        }
        match percent_decode(encoded) {
            Some(group_id) => api::group(backend, access, group_id).await,
            None => json_error(
                StatusCode::BAD_REQUEST,
                "the group id is not valid percent-encoded UTF-8",
            ),
        }
    }

    /// Whose view the request gets: open without an auth file; otherwise the principal whose
    /// token the `Authorization: Bearer` header carries.
    async fn access(
        &self,
        req: &Request<Incoming>,
        peer: IpAddr,
    ) -> Result<Access, Response<Full<Bytes>>> {
        if !self.auth.enabled() {
            return Ok(Access::open());
        }
        let token = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(json_error(
                StatusCode::UNAUTHORIZED,
                "this server has an auth file: give a principal's token",
            ));
        };
        // A wrong token is a guess: spaced out per address as a failed Hello is.
        match self.auth.hello_delay(peer, Instant::now()) {
            None => {
                return Err(json_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many failed tokens from this address; wait",
                ))
            }
            Some(delay) if !delay.is_zero() => tokio::time::sleep(delay).await,
            Some(_) => {}
        }
        match self.auth.authenticate(Some(token), None) {
            Ok(identity) => Ok(identity.access),
            Err(e) => {
                self.auth.hello_failed(peer, Instant::now());
                Err(json_error(StatusCode::UNAUTHORIZED, &e.to_string()))
            }
        }
    }
}
