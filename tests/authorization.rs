//! Authorization over real TCP (issue #12, protocol §5 "Authorization"): every request allowed
//! and denied by the ACLs of an auth file, a principal confined to `orders-*` that can neither
//! see nor touch `billing-*`, `"*"` ACLs, implied `describe`, cluster admin, refused Hellos, an
//! open server without an auth file, and a reload that changes what an open connection may do
//! at its next request.
//!
//! Each test starts its own in-process server with `ServerOptions.auth` loaded from an auth
//! file in a temporary directory. Every connection is made by [`connect`]: the one function
//! that knows the transport. The cases of every request run three times
//! ([`over_every_transport!`]): over plain TCP with tokens, over TLS with tokens, and over
//! mTLS, where the client certificate's common name is the principal and no token is sent.

mod common;
mod pki;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{ensure, Context as _, Result};
use common::*;
use muster_auth::TokenHash;
use muster_coordinator::quota::Quotas;
use muster_protocol::{
    DescribedGroup, ErrorCode, HelloRequest, OffsetHistoryRequest, OffsetResetRequest,
    OffsetRestoreRequest, Request, ResetTo, Response, MAX_PROTOCOL_VERSION,
};
use muster_server::auth::Auth;
use muster_server::tls::TlsSettings;
use muster_server::ServerThread;
use rustls::pki_types::ServerName;

const ORDERS: &str = "orders-token";
const BILLING: &str = "billing-token";
const ADMIN: &str = "admin-token";
const VIEWER: &str = "viewer-token";
const DELETER: &str = "deleter-token";
const MAKER: &str = "maker-token";
const NOBODY: &str = "nobody-token";

const GROUP_DENIED: i16 = code(ErrorCode::GroupAuthorizationFailed);
const TOPIC_DENIED: i16 = code(ErrorCode::TopicAuthorizationFailed);

// ------------------------------------------------------------------------------ transport

/// How a test's clients reach its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// Plain TCP, a token in Hello.
    Plain,
    /// TLS, a token in Hello.
    Tls,
    /// TLS with a client certificate naming the principal, no token.
    Mtls,
}

tokio::task_local! {
    /// The transport of the test running in this task ([`over_every_transport!`]); plain
    /// when unset.
    static TRANSPORT: Transport;
    /// TLS servers the test running in this task started (a TLS variant that started none
    /// would silently test plain TCP).
    static TLS_STARTED: std::sync::atomic::AtomicUsize;
}

/// Runs `case` with `transport`, and checks a TLS variant really ran over TLS.
async fn run_over(
    transport: Transport,
    case: impl std::future::Future<Output = Result<()>>,
) -> Result<()> {
    let started = std::sync::atomic::AtomicUsize::new(0);
    TLS_STARTED
        .scope(started, async {
            TRANSPORT.scope(transport, case).await?;
            let started = TLS_STARTED.with(|n| n.load(std::sync::atomic::Ordering::Relaxed));
            ensure!(
                transport == Transport::Plain || started > 0,
                "a {transport:?} case started no TLS server"
            );
            Ok(())
        })
        .await
}

/// A TLS server's transport and the CA its clients trust (and that signs client certificates).
#[derive(Clone)]
struct TlsServer {
    transport: Transport,
    pki: Arc<pki::Pki>,
}

/// Servers started over TLS, by address: [`connect`] is called from any task, with only the
/// address to go by.
static TLS_SERVERS: Mutex<Option<HashMap<SocketAddr, TlsServer>>> = Mutex::new(None);

fn tls_server(addr: SocketAddr) -> Option<TlsServer> {
    TLS_SERVERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|servers| servers.get(&addr).cloned())
}

/// Opens a connection to the server, without a Hello, over the server's transport; under mTLS
/// with a client certificate whose common name is `principal` (none if `None`).
async fn connect_as(addr: SocketAddr, principal: Option<&str>) -> Result<Conn> {
    let Some(server) = tls_server(addr) else {
        return Conn::connect_raw(addr).await;
    };
    let client = match (server.transport, principal) {
        (Transport::Mtls, Some(principal)) => Some(server.pki.client(principal)),
        _ => None,
    };
    let config = pki::client_config(&server.pki.ca_path(), client.as_ref());
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("localhost")?, tcp)
        .await
        .context("TLS handshake")?;
    Ok(Conn::over(stream))
}

/// Opens a connection to the server, without a Hello (no client certificate under mTLS).
async fn connect(addr: SocketAddr) -> Result<Conn> {
    connect_as(addr, None).await
}

fn hello_with(token: Option<&str>) -> Request {
    Request::Hello(HelloRequest {
        protocol_version: MAX_PROTOCOL_VERSION,
        client_id: "authz-test".into(),
        auth_token: token.map(str::to_owned),
    })
}

/// A connection of `token`'s principal whose Hello was accepted. Under mTLS the principal is
/// named by a client certificate instead (every test token is `<principal>-token`), and the
/// Hello carries no token.
async fn login(addr: SocketAddr, token: &str) -> Result<Conn> {
    let mtls = tls_server(addr).is_some_and(|s| s.transport == Transport::Mtls);
    let (mut conn, sent) = if mtls {
        let principal = token
            .strip_suffix("-token")
            .context("test tokens end in -token")?;
        (connect_as(addr, Some(principal)).await?, None)
    } else {
        (connect(addr).await?, Some(token))
    };
    let hello = as_hello(conn.call(hello_with(sent)).await?);
    ensure!(
        hello.error_code == 0,
        "hello as {token:?} refused: {hello:?}"
    );
    Ok(conn)
}

/// Runs each named case (an `async fn() -> Result<()>`) over every [`Transport`], as three
/// tests in a module of the case's name.
macro_rules! over_every_transport {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn plain() -> Result<()> {
                run_over(Transport::Plain, super::$case()).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tls() -> Result<()> {
                run_over(Transport::Tls, super::$case()).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mtls() -> Result<()> {
                run_over(Transport::Mtls, super::$case()).await
            }
        }
    )*};
}

over_every_transport!(
    group_requests_need_read_on_the_group,
    offset_requests_need_read_on_each_topic,
    create_topics_needs_create_even_to_raise_a_partition_count,
    describe_topics_shows_only_describable_topics,
    describe_and_list_groups_need_describe,
    delete_groups_needs_delete_on_each_group,
    a_principal_confined_to_orders_can_neither_see_nor_touch_billing,
    cluster_admin_may_do_everything,
    consumer_protocol_requests_are_authorized_like_the_classic_ones,
    offset_history_needs_read_and_reset_or_restore_also_delete,
);

// ---------------------------------------------------------------------------- auth files

fn principal(name: &str, token: &str) -> String {
    format!(
        "[[principals]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\n\n",
        TokenHash::of(token).to_hex()
    )
}

fn acl(principal: &str, resource: &str, pattern: &str, operations: &[&str]) -> String {
    let operations: Vec<String> = operations.iter().map(|o| format!("\"{o}\"")).collect();
    format!(
        "[[acls]]\nprincipal = \"{principal}\"\nresource = \"{resource}\"\npattern = \"{pattern}\"\noperations = [{}]\n\n",
        operations.join(", ")
    )
}

/// The rules most tests use:
/// - `orders`: read the `orders-*` groups; read and create the `orders-*` topics;
/// - `billing`: read and delete the `billing-*` groups; read and create the `billing-*` topics;
/// - `admin`: cluster admin;
/// - `viewer`: describe every group and topic;
/// - `deleter`: delete the `orders-*` groups (which implies describing them);
/// - `maker`: create the `made-*` topics (which implies describing them);
/// - `nobody`: nothing of its own;
/// - everyone (`"*"`): read the `shared-*` groups and the topic `shared`.
fn base_rules() -> String {
    [
        principal("orders", ORDERS),
        principal("billing", BILLING),
        principal("admin", ADMIN),
        principal("viewer", VIEWER),
        principal("deleter", DELETER),
        principal("maker", MAKER),
        principal("nobody", NOBODY),
        acl("orders", "group", "orders-*", &["read"]),
        acl("orders", "topic", "orders-*", &["read", "create"]),
        acl("billing", "group", "billing-*", &["read", "delete"]),
        acl("billing", "topic", "billing-*", &["read", "create"]),
        acl("admin", "cluster", "*", &["admin"]),
        acl("viewer", "group", "*", &["describe"]),
        acl("viewer", "topic", "*", &["describe"]),
        acl("deleter", "group", "orders-*", &["delete"]),
        acl("maker", "topic", "made-*", &["create"]),
        acl("*", "group", "shared-*", &["read"]),
        acl("*", "topic", "shared", &["read"]),
    ]
    .concat()
}

/// A server whose rules come from an auth file it can be told to reload.
struct Secured {
    server: ServerThread,
    auth: Arc<Auth>,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Secured {
    /// Starts a server with `rules`, over the transport of the running test
    /// ([`TRANSPORT`]).
    fn start(rules: &str) -> Result<Secured> {
        let dir = tempfile::tempdir().context("temp dir")?;
        let file = dir.path().join("auth.toml");
        std::fs::write(&file, rules)?;
        let auth = Arc::new(Auth::from_file(&file, Quotas::default())?);
        let transport = TRANSPORT.try_with(|t| *t).unwrap_or(Transport::Plain);
        let pki = (transport != Transport::Plain).then(|| Arc::new(pki::Pki::new("authz")));
        let tls = match &pki {
            None => None,
            Some(pki) => {
                let server = pki.server();
                let client_ca = pki.ca_path();
                let client_ca = (transport == Transport::Mtls).then_some(client_ca.as_path());
                Some(TlsSettings::load(&server.cert, &server.key, client_ca)?)
            }
        };
        let server = start_server_with(fast_config(), |o| {
            o.auth = Arc::clone(&auth);
            o.tls = tls;
        });
        let mut servers = TLS_SERVERS.lock().unwrap_or_else(PoisonError::into_inner);
        let servers = servers.get_or_insert_with(HashMap::new);
        match pki {
            Some(pki) => {
                servers.insert(server.local_addr(), TlsServer { transport, pki });
                let _ =
                    TLS_STARTED.try_with(|n| n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            }
            // A plain server may get the port of a TLS server of an earlier test (the tests
            // run at once): its clients must not speak TLS to it (a CI run failed so).
            None => {
                servers.remove(&server.local_addr());
            }
        }
        Ok(Secured {
            server,
            auth,
            file,
            _dir: dir,
        })
    }

    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Rewrites the auth file and reloads it, as SIGHUP does.
    fn reload(&self, rules: &str) -> Result<()> {
        std::fs::write(&self.file, rules)?;
        self.auth.reload()?;
        Ok(())
    }
}

// -------------------------------------------------------------------------------- helpers

/// A Stable group of one member on a connection of `token`'s principal.
async fn one_member_group(addr: SocketAddr, token: &str, group: &str) -> Result<Member> {
    let conn = login(addr, token).await?;
    let mut member = Member::pending(conn, group, LONG_MS, LONG_MS).await?;
    member.join().await?;
    let id = member.id.clone();
    // The member owns partitions 0 and 1 of every topic these tests commit to: what is
    // checked here is the ACLs, not ownership (PARTITION_NOT_OWNED).
    let owned = muster_protocol::MemberAssignment {
        member_id: id,
        partitions: [TOPIC, "orders-a", "billing-a", "billing-b", "shared", "x"]
            .into_iter()
            .map(|topic| muster_protocol::TopicPartitions {
                topic: topic.into(),
                partitions: vec![0, 1],
            })
            .collect(),
        user_data: Vec::new(),
    };
    let synced = member.sync(vec![owned]).await?;
    ensure!(synced.error_code == 0, "sync: {synced:?}");
    Ok(member)
}

/// A simple (generation -1) commit that creates `group` as an Empty group with offsets.
async fn empty_group(conn: &mut Conn, group: &str, topic: &str) -> Result<()> {
    let committed = as_commit(
        conn.call(commit(group, -1, "", &[(topic, 0, 1, None)]))
            .await?,
    );
    ensure!(
        commit_codes(&committed).iter().all(|(_, _, c)| *c == 0),
        "commit to {group}: {committed:?}"
    );
    Ok(())
}

async fn listed(conn: &mut Conn) -> Result<Vec<String>> {
    let listed = as_list(conn.call(list_groups(&[])).await?);
    ensure!(listed.error_code == 0, "list: {listed:?}");
    Ok(listed.groups.into_iter().map(|g| g.group_id).collect())
}

async fn described(conn: &mut Conn, groups: &[&str]) -> Result<Vec<DescribedGroup>> {
    Ok(as_describe(conn.call(describe_groups(groups)).await?).groups)
}

async fn topics_seen(conn: &mut Conn, names: Option<&[&str]>) -> Result<Vec<(String, i32)>> {
    let described = as_describe_topics(conn.call(describe_topics(names)).await?);
    ensure!(described.error_code == 0, "describe topics: {described:?}");
    Ok(described
        .topics
        .into_iter()
        .map(|t| (t.topic, t.partitions))
        .collect())
}

fn denied_dead(d: &DescribedGroup, group: &str) {
    assert_eq!(d.group_id, group);
    assert_eq!(d.error_code, GROUP_DENIED, "{d:?}");
    assert_eq!(d.state, "Dead", "{d:?}");
    assert_eq!(d.generation_id, -1, "{d:?}");
    assert!(d.members.is_empty(), "{d:?}");
    assert!(d.leader_id.is_empty() && d.assignor.is_none(), "{d:?}");
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| (*s).to_owned()).collect()
}

// ---------------------------------------------------------------------------- Hello

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_without_or_with_an_unknown_token_is_refused_and_closed() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    // A known token first (failed Hellos from this address are spaced out afterwards).
    login(addr, ORDERS).await?;
    for token in [None, Some("not-a-token"), Some("")] {
        let mut conn = connect(addr).await?;
        let hello = as_hello(conn.call(hello_with(token)).await?);
        assert_eq!(
            hello.error_code,
            code(ErrorCode::AuthenticationFailed),
            "{token:?}"
        );
        conn.closed()
            .await
            .context("closed after a refused Hello")?;
    }
    // A request before any Hello is not served either.
    let mut conn = connect(addr).await?;
    let answer = conn.call(list_groups(&[])).await?;
    assert_eq!(as_error(answer).error_code, code(ErrorCode::IllegalState));
    conn.closed().await?;
    Ok(())
}

// ------------------------------------------------------------------ group requests

async fn group_requests_need_read_on_the_group() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    // Allowed: the whole life of a member of an `orders-*` group.
    let mut member = one_member_group(addr, ORDERS, "orders-life").await?;
    assert_eq!(member.heartbeat().await?, 0);
    let committed = as_commit(
        member
            .conn
            .call(commit(
                "orders-life",
                member.generation,
                &member.id,
                &[("orders-a", 0, 42, None)],
            ))
            .await?,
    );
    assert_eq!(commit_codes(&committed), vec![("orders-a".into(), 0, 0)]);
    let got = as_fetch(
        member
            .conn
            .call(fetch("orders-life", Some(&[("orders-a", &[0])])))
            .await?,
    );
    assert_eq!(got.topics[0].partitions[0].offset, 42);
    let id = member.id.clone();
    let left = as_leave(member.conn.call(leave("orders-life", &[&id])).await?);
    assert_eq!(left.error_code, 0);
    assert_eq!(left.members[0].error_code, 0);

    // Denied: every group request of `nobody` on the same group, answered
    // GROUP_AUTHORIZATION_FAILED before anything else is looked at.
    let mut other = one_member_group(addr, ORDERS, "orders-held").await?;
    let mut nobody = login(addr, NOBODY).await?;
    let join = as_join(
        nobody
            .call(join_request("orders-held", "", LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(join.error_code, GROUP_DENIED);
    assert!(
        join.member_id.is_empty(),
        "no member id handed out: {join:?}"
    );
    let sync = as_sync(
        nobody
            .call(sync_request(
                "orders-held",
                other.generation,
                &other.id,
                vec![],
            ))
            .await?,
    );
    assert_eq!(sync.error_code, GROUP_DENIED);
    let hb = as_heartbeat(
        nobody
            .call(heartbeat("orders-held", other.generation, &other.id))
            .await?,
    );
    assert_eq!(hb, GROUP_DENIED);
    let left = as_leave(nobody.call(leave("orders-held", &[&other.id])).await?);
    assert_eq!(left.error_code, GROUP_DENIED);
    let committed = as_commit(
        nobody
            .call(commit(
                "orders-held",
                other.generation,
                &other.id,
                &[("shared", 0, 7, None)],
            ))
            .await?,
    );
    assert_eq!(committed.error_code, GROUP_DENIED);
    assert_eq!(
        commit_codes(&committed),
        vec![("shared".into(), 0, GROUP_DENIED)]
    );
    let fetched = as_fetch(nobody.call(fetch("orders-held", None)).await?);
    assert_eq!(fetched.error_code, GROUP_DENIED);
    assert!(fetched.topics.is_empty());
    // The member nobody tried to remove is still in its group, and nothing was committed.
    assert_eq!(other.heartbeat().await?, 0);
    let got = as_fetch(other.conn.call(fetch("orders-held", None)).await?);
    assert!(got.topics.is_empty(), "{got:?}");

    // A "*" ACL: every principal may read the `shared-*` groups.
    let shared = one_member_group(addr, NOBODY, "shared-1").await?;
    assert!(shared.generation > 0);
    Ok(())
}

// --------------------------------------------------------------- offsets and topics

async fn offset_requests_need_read_on_each_topic() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut admin = login(addr, ADMIN).await?;
    // The admin commits into an orders group offsets of a topic `orders` may not read.
    let committed = as_commit(
        admin
            .call(commit(
                "orders-offsets",
                -1,
                "",
                &[
                    ("orders-a", 0, 10, None),
                    ("billing-a", 0, 20, Some("billing-secret".into())),
                    ("shared", 0, 30, None),
                ],
            ))
            .await?,
    );
    assert!(commit_codes(&committed).iter().all(|(_, _, c)| *c == 0));

    let mut orders = login(addr, ORDERS).await?;
    // A denied topic among allowed ones: its partitions are refused (before their values are
    // checked: -1 would be INVALID_REQUEST), the others are committed.
    let committed = as_commit(
        orders
            .call(commit(
                "orders-offsets",
                -1,
                "",
                &[
                    ("orders-a", 0, 11, None),
                    ("billing-a", 0, -1, None),
                    ("billing-a", 1, 21, None),
                    ("shared", 0, 31, None),
                ],
            ))
            .await?,
    );
    assert_eq!(committed.error_code, 0);
    assert_eq!(
        commit_codes(&committed),
        vec![
            ("orders-a".into(), 0, 0),
            ("billing-a".into(), 0, TOPIC_DENIED),
            ("billing-a".into(), 1, TOPIC_DENIED),
            ("shared".into(), 0, 0),
        ]
    );
    // By name: the denied topic's partitions are refused, with no offset or metadata.
    let got = as_fetch(
        orders
            .call(fetch(
                "orders-offsets",
                Some(&[("billing-a", &[0]), ("orders-a", &[0])]),
            ))
            .await?,
    );
    assert_eq!(got.error_code, 0);
    let billing = &got.topics[0].partitions[0];
    assert_eq!(
        (
            billing.error_code,
            billing.offset,
            billing.metadata.as_deref()
        ),
        (TOPIC_DENIED, -1, None)
    );
    assert_eq!(got.topics[1].partitions[0].offset, 11);
    // Everything committed: the denied topic is left out.
    let all = as_fetch(orders.call(fetch("orders-offsets", None)).await?);
    assert_eq!(all.error_code, 0);
    let names: Vec<&str> = all.topics.iter().map(|t| t.topic.as_str()).collect();
    assert_eq!(names, vec!["orders-a", "shared"]);
    // The admin sees that billing-a was not touched.
    let all = as_fetch(admin.call(fetch("orders-offsets", None)).await?);
    let offsets = fetched(&all);
    assert_eq!(offsets[&("billing-a".to_owned(), 0)].0, 20);
    assert!(!offsets.contains_key(&("billing-a".to_owned(), 1)));
    assert_eq!(offsets[&("orders-a".to_owned(), 0)].0, 11);
    assert_eq!(offsets[&("shared".to_owned(), 0)].0, 31);

    // A simple commit whose every topic is denied creates no group.
    let committed = as_commit(
        orders
            .call(commit("orders-never", -1, "", &[("billing-a", 0, 1, None)]))
            .await?,
    );
    assert_eq!(
        commit_codes(&committed),
        vec![("billing-a".into(), 0, TOPIC_DENIED)]
    );
    assert!(!listed(&mut admin)
        .await?
        .contains(&"orders-never".to_owned()));
    Ok(())
}

async fn create_topics_needs_create_even_to_raise_a_partition_count() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut admin = login(addr, ADMIN).await?;
    let created = as_create_topics(admin.call(create_topics(&[("billing-a", 1)])).await?);
    assert_eq!(created.results[0].error_code, 0);

    let mut orders = login(addr, ORDERS).await?;
    let created = as_create_topics(
        orders
            .call(create_topics(&[
                ("orders-a", 3),
                ("billing-a", 5),
                // Denied before they are validated: an invalid name, an invalid count.
                ("bad name", 1),
                ("billing-b", 0),
                ("orders-b", 0),
            ]))
            .await?,
    );
    let codes: Vec<(&str, i16)> = created
        .results
        .iter()
        .map(|r| (r.topic.as_str(), r.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("orders-a", 0),
            ("billing-a", TOPIC_DENIED),
            ("bad name", TOPIC_DENIED),
            ("billing-b", TOPIC_DENIED),
            ("orders-b", code(ErrorCode::InvalidPartitions)),
        ]
    );
    // Raising its own topic's count is allowed; a denied raise changed nothing.
    let raised = as_create_topics(orders.call(create_topics(&[("orders-a", 6)])).await?);
    assert_eq!(raised.results[0].error_code, 0);
    let all = topics_seen(&mut admin, None).await?;
    assert_eq!(
        all,
        vec![("billing-a".to_owned(), 1), ("orders-a".to_owned(), 6)]
    );
    // The admin's invalid name gets the validation error the others were spared.
    let invalid = as_create_topics(admin.call(create_topics(&[("bad name", 1)])).await?);
    assert_eq!(invalid.results[0].error_code, code(ErrorCode::InvalidTopic));
    // Create implies describe; nothing else.
    let mut maker = login(addr, MAKER).await?;
    let made = as_create_topics(
        maker
            .call(create_topics(&[("made-1", 2), ("orders-c", 1)]))
            .await?,
    );
    let codes: Vec<i16> = made.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, TOPIC_DENIED]);
    assert_eq!(
        topics_seen(&mut maker, None).await?,
        vec![("made-1".to_owned(), 2)]
    );
    Ok(())
}

async fn describe_topics_shows_only_describable_topics() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut admin = login(addr, ADMIN).await?;
    let created = as_create_topics(
        admin
            .call(create_topics(&[
                ("orders-a", 2),
                ("billing-a", 3),
                ("shared", 1),
            ]))
            .await?,
    );
    assert!(created.results.iter().all(|r| r.error_code == 0));

    let mut orders = login(addr, ORDERS).await?;
    // `read` implies describe; the "*" ACL gives `shared`.
    assert_eq!(
        topics_seen(&mut orders, None).await?,
        vec![("orders-a".to_owned(), 2), ("shared".to_owned(), 1)]
    );
    assert_eq!(
        topics_seen(
            &mut orders,
            Some(&["billing-a", "orders-a", "orders-missing"])
        )
        .await?,
        vec![("orders-a".to_owned(), 2)]
    );
    assert!(topics_seen(&mut orders, Some(&["billing-a"]))
        .await?
        .is_empty());
    let mut viewer = login(addr, VIEWER).await?;
    assert_eq!(topics_seen(&mut viewer, None).await?.len(), 3);
    assert_eq!(
        topics_seen(&mut viewer, Some(&["billing-a"])).await?,
        vec![("billing-a".to_owned(), 3)]
    );
    let mut nobody = login(addr, NOBODY).await?;
    assert_eq!(
        topics_seen(&mut nobody, None).await?,
        vec![("shared".to_owned(), 1)]
    );
    Ok(())
}

// ------------------------------------------------------------------- admin on groups

async fn describe_and_list_groups_need_describe() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let _orders = one_member_group(addr, ORDERS, "orders-1").await?;
    let _billing = one_member_group(addr, BILLING, "billing-1").await?;
    let _shared = one_member_group(addr, NOBODY, "shared-1").await?;

    let mut orders = login(addr, ORDERS).await?;
    assert_eq!(
        listed(&mut orders).await?,
        strings(&["orders-1", "shared-1"])
    );
    let groups = described(&mut orders, &["billing-1", "orders-1", "", "billing-none"]).await?;
    denied_dead(&groups[0], "billing-1");
    assert_eq!(groups[1].error_code, 0);
    assert_eq!(groups[1].state, "Stable");
    assert_eq!(groups[1].members.len(), 1);
    // Checked before the id is validated: an invalid id says no more than a denied one.
    denied_dead(&groups[2], "");
    denied_dead(&groups[3], "billing-none");

    // Describe alone: sees every group, touches none.
    let mut viewer = login(addr, VIEWER).await?;
    assert_eq!(
        listed(&mut viewer).await?,
        strings(&["billing-1", "orders-1", "shared-1"])
    );
    let groups = described(&mut viewer, &["billing-1"]).await?;
    assert_eq!(groups[0].error_code, 0);
    assert_eq!(groups[0].members.len(), 1);
    let join = as_join(
        viewer
            .call(join_request("billing-1", "", LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(join.error_code, GROUP_DENIED);
    let deleted = as_delete(viewer.call(delete_groups(&["billing-1"])).await?);
    assert_eq!(deleted.results[0].error_code, GROUP_DENIED);

    // Delete implies describe.
    let mut deleter = login(addr, DELETER).await?;
    assert_eq!(
        listed(&mut deleter).await?,
        strings(&["orders-1", "shared-1"])
    );
    // The admin validates ids like an open server.
    let mut admin = login(addr, ADMIN).await?;
    let groups = described(&mut admin, &["", "billing-1"]).await?;
    assert_eq!(groups[0].error_code, code(ErrorCode::InvalidGroupId));
    assert_eq!(groups[1].error_code, 0);
    Ok(())
}

async fn delete_groups_needs_delete_on_each_group() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut admin = login(addr, ADMIN).await?;
    for group in ["orders-1", "orders-2", "billing-1"] {
        empty_group(&mut admin, group, "t").await?;
    }
    // `read` does not imply delete.
    let mut orders = login(addr, ORDERS).await?;
    let deleted = as_delete(orders.call(delete_groups(&["orders-1"])).await?);
    assert_eq!(deleted.results[0].error_code, GROUP_DENIED);

    let mut deleter = login(addr, DELETER).await?;
    let deleted = as_delete(
        deleter
            .call(delete_groups(&["orders-1", "billing-1", "orders-none", ""]))
            .await?,
    );
    let codes: Vec<(&str, i16)> = deleted
        .results
        .iter()
        .map(|r| (r.group_id.as_str(), r.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("orders-1", 0),
            ("billing-1", GROUP_DENIED),
            ("orders-none", code(ErrorCode::GroupIdNotFound)),
            ("", GROUP_DENIED),
        ]
    );
    assert_eq!(
        listed(&mut admin).await?,
        strings(&["billing-1", "orders-2"])
    );
    // Cluster admin deletes anything.
    let deleted = as_delete(
        admin
            .call(delete_groups(&["billing-1", "orders-2"]))
            .await?,
    );
    assert!(
        deleted.results.iter().all(|r| r.error_code == 0),
        "{deleted:?}"
    );
    assert!(listed(&mut admin).await?.is_empty());
    Ok(())
}

// ------------------------------------------------------------ confinement, admin, open

/// A principal confined to `orders-*` learns nothing of `billing-*` and changes nothing there.
async fn a_principal_confined_to_orders_can_neither_see_nor_touch_billing() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut billing = one_member_group(addr, BILLING, "billing-live").await?;
    let billing_id = billing.id.clone();
    let generation = billing.generation;
    let committed = as_commit(
        billing
            .conn
            .call(commit(
                "billing-live",
                generation,
                &billing_id,
                &[("billing-a", 0, 500, Some("ledger".into()))],
            ))
            .await?,
    );
    assert!(commit_codes(&committed).iter().all(|(_, _, c)| *c == 0));
    let mut billing_admin = login(addr, BILLING).await?;
    empty_group(&mut billing_admin, "billing-idle", "billing-a").await?;
    let _orders_member = one_member_group(addr, ORDERS, "orders-live").await?;

    let mut orders = login(addr, ORDERS).await?;
    // See: nothing listed, described or fetched reveals a billing group.
    assert_eq!(listed(&mut orders).await?, strings(&["orders-live"]));
    let groups = described(
        &mut orders,
        &["billing-live", "billing-idle", "billing-none"],
    )
    .await?;
    denied_dead(&groups[0], "billing-live");
    denied_dead(&groups[1], "billing-idle");
    denied_dead(&groups[2], "billing-none");
    assert_eq!(
        groups[0],
        DescribedGroup {
            group_id: "billing-live".into(),
            ..groups[2].clone()
        },
        "an existing group looks like a missing one"
    );
    for group in ["billing-live", "billing-none"] {
        let got = as_fetch(orders.call(fetch(group, None)).await?);
        assert_eq!(
            (got.error_code, got.topics.len()),
            (GROUP_DENIED, 0),
            "{group}"
        );
        let got = as_fetch(
            orders
                .call(fetch(group, Some(&[("billing-a", &[0])])))
                .await?,
        );
        assert_eq!(
            (got.error_code, got.topics.len()),
            (GROUP_DENIED, 0),
            "{group}"
        );
    }
    // Touch: join, sync, heartbeat, leave, commit, delete are all refused.
    let join = as_join(
        orders
            .call(join_request("billing-live", "", LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(join.error_code, GROUP_DENIED);
    let join = as_join(
        orders
            .call(join_request("billing-live", &billing_id, LONG_MS, LONG_MS))
            .await?,
    );
    assert_eq!(join.error_code, GROUP_DENIED);
    let sync = as_sync(
        orders
            .call(sync_request(
                "billing-live",
                generation,
                &billing_id,
                vec![],
            ))
            .await?,
    );
    assert_eq!(sync.error_code, GROUP_DENIED);
    assert_eq!(
        as_heartbeat(
            orders
                .call(heartbeat("billing-live", generation, &billing_id))
                .await?
        ),
        GROUP_DENIED
    );
    let left = as_leave(orders.call(leave("billing-live", &[&billing_id])).await?);
    assert_eq!(left.error_code, GROUP_DENIED);
    for (group, generation, member) in [
        ("billing-live", generation, billing_id.as_str()),
        ("billing-idle", -1, ""),
        ("billing-new", -1, ""),
    ] {
        let committed = as_commit(
            orders
                .call(commit(
                    group,
                    generation,
                    member,
                    &[("orders-a", 0, 1, None)],
                ))
                .await?,
        );
        assert_eq!(committed.error_code, GROUP_DENIED, "{group}");
    }
    let deleted = as_delete(
        orders
            .call(delete_groups(&["billing-idle", "billing-live"]))
            .await?,
    );
    assert!(deleted.results.iter().all(|r| r.error_code == GROUP_DENIED));
    // Its own group, committing to a billing topic: refused per partition.
    let committed = as_commit(
        orders
            .call(commit(
                "orders-live-offsets",
                -1,
                "",
                &[("billing-a", 0, 1, None)],
            ))
            .await?,
    );
    assert_eq!(
        commit_codes(&committed),
        vec![("billing-a".into(), 0, TOPIC_DENIED)]
    );

    // Billing is as it was: same member, same generation, same offsets, both groups there.
    assert_eq!(billing.heartbeat().await?, 0);
    let groups = described(&mut billing_admin, &["billing-live"]).await?;
    assert_eq!(groups[0].generation_id, generation);
    assert_eq!(groups[0].members.len(), 1);
    assert_eq!(groups[0].members[0].member_id, billing_id);
    let got = as_fetch(billing_admin.call(fetch("billing-live", None)).await?);
    assert_eq!(
        fetched(&got)[&("billing-a".to_owned(), 0)],
        (500, Some("ledger".into()))
    );
    assert_eq!(
        listed(&mut billing_admin).await?,
        strings(&["billing-idle", "billing-live"])
    );
    Ok(())
}

async fn cluster_admin_may_do_everything() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let _billing = one_member_group(addr, BILLING, "billing-1").await?;
    let mut admin_member = one_member_group(addr, ADMIN, "anything-at-all").await?;
    assert_eq!(admin_member.heartbeat().await?, 0);
    let mut admin = login(addr, ADMIN).await?;
    let committed = as_commit(
        admin
            .call(commit(
                "billing-admin",
                -1,
                "",
                &[("billing-a", 0, 3, None), ("x", 0, 4, None)],
            ))
            .await?,
    );
    assert!(commit_codes(&committed).iter().all(|(_, _, c)| *c == 0));
    let got = as_fetch(admin.call(fetch("billing-admin", None)).await?);
    assert_eq!(got.topics.len(), 2);
    assert_eq!(
        listed(&mut admin).await?,
        strings(&["anything-at-all", "billing-1", "billing-admin"])
    );
    let groups = described(&mut admin, &["billing-1"]).await?;
    assert_eq!((groups[0].error_code, groups[0].members.len()), (0, 1));
    let created = as_create_topics(
        admin
            .call(create_topics(&[("any", 1), ("billing-z", 2)]))
            .await?,
    );
    assert!(created.results.iter().all(|r| r.error_code == 0));
    assert_eq!(topics_seen(&mut admin, None).await?.len(), 2);
    let deleted = as_delete(admin.call(delete_groups(&["billing-admin"])).await?);
    assert_eq!(deleted.results[0].error_code, 0);
    let id = admin_member.id.clone();
    let left = as_leave(
        admin_member
            .conn
            .call(leave("anything-at-all", &[&id]))
            .await?,
    );
    assert_eq!(left.error_code, 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_auth_file_everything_is_open() -> Result<()> {
    let server = start_server(fast_config());
    let addr = server.local_addr();
    // No token needed, and any token is ignored.
    let mut conn = connect(addr).await?;
    assert_eq!(as_hello(conn.call(hello_with(None)).await?).error_code, 0);
    let mut other = connect(addr).await?;
    assert_eq!(
        as_hello(other.call(hello_with(Some("whatever"))).await?).error_code,
        0
    );
    let mut member = Member::pending(other, "billing-1", LONG_MS, LONG_MS).await?;
    member.join().await?;
    let id = member.id.clone();
    assert_eq!(
        member
            .sync(vec![assignment(&id, vec![0])])
            .await?
            .error_code,
        0
    );
    assert_eq!(member.heartbeat().await?, 0);
    empty_group(&mut conn, "orders-1", "billing-a").await?;
    let got = as_fetch(conn.call(fetch("orders-1", None)).await?);
    assert_eq!(got.topics.len(), 1);
    assert_eq!(
        listed(&mut conn).await?,
        strings(&["billing-1", "orders-1"])
    );
    let groups = described(&mut conn, &["billing-1", ""]).await?;
    assert_eq!(groups[0].members.len(), 1);
    assert_eq!(groups[1].error_code, code(ErrorCode::InvalidGroupId));
    let created = as_create_topics(conn.call(create_topics(&[("billing-a", 1)])).await?);
    assert_eq!(created.results[0].error_code, 0);
    assert_eq!(
        topics_seen(&mut conn, None).await?,
        vec![("billing-a".to_owned(), 1)]
    );
    let deleted = as_delete(conn.call(delete_groups(&["orders-1"])).await?);
    assert_eq!(deleted.results[0].error_code, 0);
    let left = as_leave(member.conn.call(leave("billing-1", &[&id])).await?);
    assert_eq!(left.error_code, 0);
    Ok(())
}

// ------------------------------------------------------------------------------ reload

/// `Auth::reload` (what SIGHUP calls) reaches a connection that is already open at its next
/// request: a grant added is usable, a grant removed and a principal removed are denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_what_an_open_connection_may_do() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut admin = login(addr, ADMIN).await?;
    let created = as_create_topics(
        admin
            .call(create_topics(&[("billing-a", 1), ("orders-a", 1)]))
            .await?,
    );
    assert!(created.results.iter().all(|r| r.error_code == 0));
    let mut orders = login(addr, ORDERS).await?;
    let billing_commit = || commit("billing-x", -1, "", &[("billing-a", 0, 1, None)]);
    let committed = as_commit(orders.call(billing_commit()).await?);
    assert_eq!(committed.error_code, GROUP_DENIED);

    // Grant added: the same connection may now read billing groups and topics.
    let granted = [
        base_rules(),
        acl("orders", "group", "billing-*", &["read"]),
        acl("orders", "topic", "billing-*", &["read"]),
    ]
    .concat();
    secured.reload(&granted)?;
    let committed = as_commit(orders.call(billing_commit()).await?);
    assert_eq!(commit_codes(&committed), vec![("billing-a".into(), 0, 0)]);
    assert_eq!(listed(&mut orders).await?, strings(&["billing-x"]));
    assert_eq!(
        topics_seen(&mut orders, None).await?,
        vec![("billing-a".to_owned(), 1), ("orders-a".to_owned(), 1)]
    );

    // Topic grant removed: the group may still be read, the topic not.
    let group_only = [base_rules(), acl("orders", "group", "billing-*", &["read"])].concat();
    secured.reload(&group_only)?;
    let committed = as_commit(orders.call(billing_commit()).await?);
    assert_eq!(
        commit_codes(&committed),
        vec![("billing-a".into(), 0, TOPIC_DENIED)]
    );

    // Grant removed: denied again.
    secured.reload(&base_rules())?;
    let committed = as_commit(orders.call(billing_commit()).await?);
    assert_eq!(committed.error_code, GROUP_DENIED);
    assert!(listed(&mut orders).await?.is_empty());

    // A file that does not parse is refused and the rules in force stay.
    std::fs::write(&secured.file, "[[principals]]\nname = ")?;
    assert!(secured.auth.reload().is_err());
    empty_group(&mut orders, "orders-1", "orders-a").await?;

    // Principal removed: the open connection may do nothing more, not even what "*" grants,
    // and its token no longer authenticates.
    let without_orders: String = base_rules()
        .split("\n\n")
        .filter(|block| {
            !block.contains("\"orders\"") && !block.contains(&TokenHash::of(ORDERS).to_hex())
        })
        .map(|block| format!("{block}\n\n"))
        .collect();
    secured.reload(&without_orders)?;
    let committed = as_commit(
        orders
            .call(commit("orders-1", -1, "", &[("orders-a", 0, 2, None)]))
            .await?,
    );
    assert_eq!(committed.error_code, GROUP_DENIED);
    let committed = as_commit(
        orders
            .call(commit("shared-1", -1, "", &[("shared", 0, 2, None)]))
            .await?,
    );
    assert_eq!(committed.error_code, GROUP_DENIED);
    assert!(listed(&mut orders).await?.is_empty());
    assert!(topics_seen(&mut orders, None).await?.is_empty());
    let created = as_create_topics(orders.call(create_topics(&[("orders-b", 1)])).await?);
    assert_eq!(created.results[0].error_code, TOPIC_DENIED);
    let deleted = as_delete(orders.call(delete_groups(&["orders-1"])).await?);
    assert_eq!(deleted.results[0].error_code, GROUP_DENIED);
    let mut again = connect(addr).await?;
    let hello = as_hello(again.call(hello_with(Some(ORDERS))).await?);
    assert_eq!(hello.error_code, code(ErrorCode::AuthenticationFailed));
    // The others are unaffected.
    assert_eq!(
        listed(&mut admin).await?,
        strings(&["billing-x", "orders-1"])
    );
    Ok(())
}

// ----------------------------------------------------------------------------- metrics

fn denials(resource: &str) -> f64 {
    let series = format!("muster_authorization_denials_total{{resource=\"{resource}\"}}");
    muster_server::telemetry::render_metrics()
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str())?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Every denial counts in `muster_authorization_denials_total` by resource type. (Other
/// tests of this binary deny concurrently, so the counts are checked as lower bounds.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denials_are_counted_by_resource_type() -> Result<()> {
    muster_server::telemetry::metrics_handle();
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let (groups_before, topics_before) = (denials("group"), denials("topic"));
    let mut orders = login(addr, ORDERS).await?;
    // Groups: one group request, two described, one deleted.
    as_join(
        orders
            .call(join_request("billing-1", "", LONG_MS, LONG_MS))
            .await?,
    );
    described(&mut orders, &["billing-1", "billing-2"]).await?;
    as_delete(orders.call(delete_groups(&["orders-1"])).await?);
    // Topics: two in a commit, one fetched, one created, one described by name.
    as_commit(
        orders
            .call(commit(
                "orders-1",
                -1,
                "",
                &[
                    ("billing-a", 0, 1, None),
                    ("billing-b", 0, 1, None),
                    ("orders-a", 0, 1, None),
                ],
            ))
            .await?,
    );
    as_fetch(
        orders
            .call(fetch("orders-1", Some(&[("billing-a", &[0])])))
            .await?,
    );
    as_create_topics(orders.call(create_topics(&[("billing-c", 1)])).await?);
    topics_seen(&mut orders, Some(&["billing-a"])).await?;
    let groups = denials("group") - groups_before;
    let topics = denials("topic") - topics_before;
    ensure!(groups >= 4.0, "group denials counted: {groups}");
    ensure!(topics >= 5.0, "topic denials counted: {topics}");
    Ok(())
}

// ------------------------------------------------------------------ the consumer protocol

fn consumer_join(group: &str, member_id: &str) -> Request {
    Request::ConsumerGroupHeartbeat(muster_protocol::ConsumerGroupHeartbeatRequest {
        group_id: group.into(),
        member_id: member_id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topics: Some(vec!["orders-a".into()]),
        ..Default::default()
    })
}

/// ConsumerGroupHeartbeat needs `read` on the group (as JoinGroup); ConsumerGroupDescribe and
/// GroupSimulate need `describe` (as DescribeGroups), checked before anything else.
async fn consumer_protocol_requests_are_authorized_like_the_classic_ones() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut orders = login(addr, ORDERS).await?;
    let joined = match orders.call(consumer_join("orders-cg", "m-1")).await? {
        muster_protocol::Response::ConsumerGroupHeartbeat(r) => r,
        other => anyhow::bail!("unexpected {other:?}"),
    };
    ensure!(joined.error_code == 0, "{joined:?}");
    let mut nobody = login(addr, NOBODY).await?;
    match nobody.call(consumer_join("orders-cg", "m-2")).await? {
        muster_protocol::Response::ConsumerGroupHeartbeat(r) => {
            ensure!(r.error_code == GROUP_DENIED, "{r:?}")
        }
        other => anyhow::bail!("unexpected {other:?}"),
    }
    let describe = Request::ConsumerGroupDescribe(muster_protocol::ConsumerGroupDescribeRequest {
        group_ids: vec!["orders-cg".into()],
    });
    let simulate = Request::GroupSimulate(muster_protocol::GroupSimulateRequest {
        group_id: "orders-cg".into(),
        add_members: 1,
        ..Default::default()
    });
    // nobody may not describe it; viewer (describe on every group) may.
    for (conn, expected) in [
        (&mut nobody, GROUP_DENIED),
        (&mut login(addr, VIEWER).await?, 0),
    ] {
        match conn.call(describe.clone()).await? {
            muster_protocol::Response::ConsumerGroupDescribe(r) => {
                ensure!(r.groups[0].error_code == expected, "{r:?}");
                ensure!(expected != 0 || r.groups[0].members.len() == 1, "{r:?}");
                ensure!(expected == 0 || r.groups[0].members.is_empty(), "{r:?}");
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        match conn.call(simulate.clone()).await? {
            muster_protocol::Response::GroupSimulate(r) => {
                ensure!(r.error_code == expected, "{r:?}")
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
    }
    Ok(())
}

// --------------------------------------------------------------- offset history and reset

fn reset_request(group: &str, execute: bool) -> Request {
    Request::OffsetReset(OffsetResetRequest {
        group_id: group.into(),
        to: ResetTo::EarliestRecorded,
        topics: Vec::new(),
        execute,
    })
}

fn reset_code(r: Response) -> i16 {
    match r {
        Response::OffsetReset(r) => r.error_code,
        other => panic!("not an OffsetReset answer: {other:?}"),
    }
}

/// OffsetHistory and the dry runs need `read` on the group; an executed OffsetReset or
/// OffsetRestore needs `delete` too (docs/security.md); `describe` alone sees nothing.
async fn offset_history_needs_read_and_reset_or_restore_also_delete() -> Result<()> {
    let secured = Secured::start(&base_rules())?;
    let addr = secured.addr();
    let mut admin = login(addr, ADMIN).await?;
    empty_group(&mut admin, "orders-idle", "orders-a").await?;
    empty_group(&mut admin, "billing-idle", "billing-a").await?;
    let history = |group: &str| {
        Request::OffsetHistory(OffsetHistoryRequest {
            group_id: group.into(),
            topic: None,
            partition: None,
            limit: 0,
        })
    };
    let history_code = |r: Response| match r {
        Response::OffsetHistory(r) => r.error_code,
        other => panic!("not an OffsetHistory answer: {other:?}"),
    };
    // `read`: history and dry runs, but no execution.
    let mut orders = login(addr, ORDERS).await?;
    assert_eq!(history_code(orders.call(history("orders-idle")).await?), 0);
    assert_eq!(
        reset_code(orders.call(reset_request("orders-idle", false)).await?),
        0
    );
    assert_eq!(
        reset_code(orders.call(reset_request("orders-idle", true)).await?),
        GROUP_DENIED
    );
    let restore = |execute| {
        Request::OffsetRestore(OffsetRestoreRequest {
            group_id: "orders-idle".into(),
            execute,
        })
    };
    match orders.call(restore(true)).await? {
        Response::OffsetRestore(r) => assert_eq!(r.error_code, GROUP_DENIED),
        other => panic!("{other:?}"),
    }
    // Nor on another principal's group.
    assert_eq!(
        history_code(orders.call(history("billing-idle")).await?),
        GROUP_DENIED
    );
    // `read` and `delete`: the reset is executed.
    let mut billing = login(addr, BILLING).await?;
    assert_eq!(
        reset_code(billing.call(reset_request("billing-idle", true)).await?),
        0
    );
    // `describe` alone: nothing.
    let mut viewer = login(addr, VIEWER).await?;
    assert_eq!(
        history_code(viewer.call(history("orders-idle")).await?),
        GROUP_DENIED
    );
    assert_eq!(
        reset_code(viewer.call(reset_request("orders-idle", false)).await?),
        GROUP_DENIED
    );
    Ok(())
}
