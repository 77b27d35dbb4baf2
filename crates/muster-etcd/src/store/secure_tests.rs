//! EtcdStore against an etcd as production runs it (testkit's secure cluster: TLS with client
//! certificates, authentication on, a user that may read and write only under the store's
//! prefix): the generic storage suite; simple and JWT tokens expiring or going stale, and the
//! token across members; TLS without authentication (also with a user configured before
//! etcd's authentication is enabled); the client certificate's common name as the user; and
//! each way the connection can be refused (wrong password, no rights, read-only rights, no
//! user, a client certificate of another CA, a server certificate of an untrusted CA), every
//! one a clear error at connect, within the request timeout.

use std::time::{Duration, Instant};

use muster_coordinator::storage::suite::{commit, group, load, offset, put_offsets, Backend};
use muster_coordinator::storage::{Mutation, Store};

use super::{EtcdStore, EtcdStoreConfig};
use crate::error::EtcdError;
use crate::security::{EtcdSecurity, EtcdTls};
use crate::testkit::{EtcdCluster, SecureOptions, TestUser, CLIENT_COMMON_NAME, ROOT_PASSWORD};

const SHARDS: u32 = 4;
const USER: &str = "muster";
const PASSWORD: &str = "muster-test-password";

/// A secure etcd whose user `muster` may read and write under `/t/` only.
fn secure_etcd(auth_token_ttl_s: Option<u64>) -> EtcdCluster {
    EtcdCluster::secure(
        1,
        &SecureOptions {
            users: vec![
                TestUser::new(USER, PASSWORD, Some("/t/")),
                TestUser::new("stranger", "stranger-password", Some("/other/")),
                TestUser::read_only("reader", "reader-password", "/t/"),
            ],
            auth_token_ttl_s,
            jwt: false,
        },
    )
    .expect("etcd starts with TLS and auth (see the message to install it)")
}

fn config(cluster: &EtcdCluster, security: EtcdSecurity) -> EtcdStoreConfig {
    EtcdStoreConfig {
        security,
        ..EtcdStoreConfig::new(cluster.endpoints(), "t", SHARDS)
    }
}

fn connect_as(cluster: &EtcdCluster, user: &str, password: &str) -> Result<EtcdStore, EtcdError> {
    let security = cluster.security(user, password).expect("TLS files");
    EtcdStore::connect(config(cluster, security))
}

/// Plays the ownership module: creates every shard's owner key and grants the shards.
fn own_all_shards(store: &EtcdStore) {
    for shard in 0..SHARDS {
        let key = store.keys().owner(shard);
        let client = store.client().clone();
        let revision = store
            .block_on(async move { client.put(&key, b"this-node").await })
            .expect("the runtime runs")
            .expect("the owner key is written");
        store.own_shard(shard, revision);
    }
}

/// A secure etcd and a store on it as the restricted user, owning every shard.
struct SecureBackend {
    cluster: EtcdCluster,
    store: EtcdStore,
}

impl SecureBackend {
    fn new() -> Self {
        let cluster = secure_etcd(None);
        let store = connect_as(&cluster, USER, PASSWORD).expect("connects as muster");
        own_all_shards(&store);
        SecureBackend { cluster, store }
    }
}

impl Backend for SecureBackend {
    fn store(&self) -> &dyn Store {
        &self.store
    }

    /// Another store as the same user loads exactly what this one does.
    fn finish(self) {
        let before = self.store.load().expect("loads");
        drop(self.store);
        let again = connect_as(&self.cluster, USER, PASSWORD).expect("connects");
        assert_eq!(again.load().expect("loads"), before);
    }
}

mod suite {
    muster_coordinator::store_suite!(super::SecureBackend::new());
}

/// Writes one group with an offset, and reads it back.
fn write_and_read(store: &EtcdStore, group_id: &str, value: i64) {
    commit(
        store,
        vec![
            Mutation::PutGroup(group(group_id, 1)),
            put_offsets(group_id, vec![offset("orders", 0, value)]),
        ],
    );
    let state = load(store);
    assert!(
        state.groups.iter().any(|g| g.group_id == group_id),
        "{group_id} is stored"
    );
}

#[test]
fn an_expired_token_is_replaced_without_the_caller_noticing() {
    // Simple tokens live --auth-token-ttl seconds unused; etcd sweeps them every second.
    let cluster = secure_etcd(Some(1));
    let store = connect_as(&cluster, USER, PASSWORD).expect("connects");
    own_all_shards(&store);
    write_and_read(&store, "g1", 1);
    let before = store.client().authentications();
    // Idle past the TTL and the next sweep: the token is gone from etcd.
    std::thread::sleep(Duration::from_millis(2_600));
    write_and_read(&store, "g2", 2);
    assert!(
        store.client().authentications() > before,
        "the expired token was replaced ({before} authentications before)"
    );
}

/// On a three-member etcd, the member in use dies: requests go on on the others over TLS with
/// the same token, and once it expires the client authenticates again on a survivor.
#[test]
fn the_token_carries_over_to_other_members_and_is_renewed_there() {
    let mut cluster = EtcdCluster::secure(
        3,
        &SecureOptions {
            users: vec![TestUser::new(USER, PASSWORD, Some("/t/"))],
            auth_token_ttl_s: Some(1),
            jwt: false,
        },
    )
    .expect("three etcd members start with TLS and auth");
    let store = connect_as(&cluster, USER, PASSWORD).expect("connects");
    own_all_shards(&store);
    write_and_read(&store, "g1", 1);
    let first = store.client().authentications();
    // The client starts with the first endpoint: kill it.
    cluster.kill_member(0);
    write_and_read(&store, "g2", 2);
    assert_eq!(
        store.client().authentications(),
        first,
        "the token is good on every member"
    );
    std::thread::sleep(Duration::from_millis(2_600));
    write_and_read(&store, "g3", 3);
    assert!(store.client().authentications() > first);
}

/// etcd refuses a watch whose token expired in the watch's cancel reason: the client
/// authenticates again and the watch is made; a lease is granted and renewed the same way.
#[test]
fn a_watch_and_a_lease_after_the_token_expired_are_made() {
    let cluster = secure_etcd(Some(1));
    let store = connect_as(&cluster, USER, PASSWORD).expect("connects");
    let client = store.client().clone();
    let before = client.authentications();
    std::thread::sleep(Duration::from_millis(2_600));
    let prefix = store.keys().topics_prefix();
    let watched = store
        .block_on(async move {
            let watch = client.watch_prefix(&prefix, 0).await;
            let lease = client.lease_grant(5).await;
            let renewed = match &lease {
                Ok(lease) => client
                    .lease_keep_alive_once(lease.id, Duration::from_secs(2))
                    .await
                    .map(|ttl| ttl.is_some()),
                Err(_) => Ok(false),
            };
            (watch.map(drop), lease.map(drop), renewed)
        })
        .expect("the runtime runs");
    let (watch, lease, renewed) = watched;
    watch.expect("the watch is made");
    lease.expect("the lease is granted");
    assert!(renewed.expect("the lease is renewed"));
    assert!(store.client().authentications() > before);
}

/// Connecting fails with an error whose text has every one of `expected`, within the
/// request timeout (no hang), and never shows `secret`.
fn refused(result: Result<EtcdStore, EtcdError>, started: Instant, expected: &[&str]) -> String {
    let error = result.expect_err("the connection is refused").to_string();
    eprintln!("refused as expected: {error}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "refused within the request timeout: {:?}",
        started.elapsed()
    );
    for part in expected {
        assert!(error.contains(part), "{error:?} lacks {part:?}");
    }
    error
}

#[test]
fn a_wrong_password_is_refused_by_name_without_the_password() {
    let cluster = secure_etcd(None);
    let started = Instant::now();
    let error = refused(
        connect_as(&cluster, USER, "not-the-password"),
        started,
        &["\"muster\"", "wrong user name or password"],
    );
    assert!(!error.contains("not-the-password"), "{error}");
}

#[test]
fn a_user_without_rights_on_the_prefix_is_told_what_to_grant() {
    let cluster = secure_etcd(None);
    let started = Instant::now();
    refused(
        connect_as(&cluster, "stranger", "stranger-password"),
        started,
        &["\"stranger\"", "/t/", "readwrite", "permission denied"],
    );
    // Read rights are not enough: the check at connect tries a write too.
    refused(
        connect_as(&cluster, "reader", "reader-password"),
        Instant::now(),
        &["\"reader\"", "/t/", "readwrite"],
    );
}

#[test]
fn no_user_on_an_etcd_with_authentication_is_refused() {
    let cluster = secure_etcd(None);
    let security = EtcdSecurity {
        tls: Some(cluster.tls().expect("TLS files")),
        credentials: None,
    };
    // etcd takes the client certificate's common name as the user, and there is none such.
    refused(
        EtcdStore::connect(config(&cluster, security)),
        Instant::now(),
        &["/t/", "permission denied", "common name"],
    );
}

#[test]
fn a_client_certificate_of_another_ca_is_refused() {
    let cluster = secure_etcd(None);
    let pki = cluster.pki().expect("a secure cluster");
    let tls = EtcdTls::load(
        &pki.ca,
        Some((&pki.rogue_client.cert, &pki.rogue_client.key)),
    )
    .expect("the files are good");
    let security = EtcdSecurity {
        tls: Some(tls),
        ..cluster.security(USER, PASSWORD).expect("TLS files")
    };
    // TLS 1.3: etcd refuses the certificate after the client's side of the handshake is
    // done, so the client sees the connection closed; the error says what that means.
    refused(
        EtcdStore::connect(config(&cluster, security)),
        Instant::now(),
        &[
            "no etcd member answered",
            "refused this client's certificate",
        ],
    );
}

#[test]
fn a_server_certificate_of_an_untrusted_ca_is_refused() {
    let cluster = secure_etcd(None);
    let pki = cluster.pki().expect("a secure cluster");
    let tls = EtcdTls::load(&pki.rogue_ca, Some((&pki.client.cert, &pki.client.key)))
        .expect("the files are good");
    let security = EtcdSecurity {
        tls: Some(tls),
        ..cluster.security(USER, PASSWORD).expect("TLS files")
    };
    let error = refused(
        EtcdStore::connect(config(&cluster, security)),
        Instant::now(),
        &[],
    );
    assert!(
        error.contains("UnknownIssuer") || error.contains("certificate"),
        "{error}"
    );
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused_when_loaded() {
    let cluster = secure_etcd(None);
    let pki = cluster.pki().expect("a secure cluster");
    let error = EtcdTls::load(&pki.ca, Some((&pki.client.cert, &pki.rogue_client.key)))
        .expect_err("a key of another certificate");
    assert!(
        error.to_string().contains("does not match the certificate"),
        "{error}"
    );
}

#[test]
fn schemes_must_match_the_tls_settings() {
    let cluster = secure_etcd(None);
    // TLS endpoints without TLS settings, and plain endpoints with them.
    let plain = EtcdStore::connect(EtcdStoreConfig::new(cluster.endpoints(), "t", SHARDS));
    assert!(plain
        .expect_err("https:// without a CA")
        .to_string()
        .contains("https:// endpoint needs the CA"),);
    let endpoints: Vec<String> = cluster
        .endpoints()
        .iter()
        .map(|e| e.replace("https://", "http://"))
        .collect();
    let security = cluster.security(USER, PASSWORD).expect("TLS files");
    let mismatched = EtcdStore::connect(EtcdStoreConfig {
        security,
        ..EtcdStoreConfig::new(endpoints, "t", SHARDS)
    });
    assert!(mismatched
        .expect_err("http:// with a CA")
        .to_string()
        .contains("use https://"));
    // A bare host:port takes the scheme of the settings.
    let bare: Vec<String> = cluster
        .endpoints()
        .iter()
        .map(|e| e.replace("https://", ""))
        .collect();
    let security = cluster.security("root", ROOT_PASSWORD).expect("TLS files");
    EtcdStore::connect(EtcdStoreConfig {
        security,
        ..EtcdStoreConfig::new(bare, "t", SHARDS)
    })
    .expect("host:port with TLS settings is https");
}

#[test]
fn tls_alone_a_user_before_auth_is_enabled_and_a_certificate_named_user_work() {
    // TLS with client certificates, no authentication.
    let cluster = EtcdCluster::secure(1, &SecureOptions::default()).expect("etcd starts with TLS");
    let security = EtcdSecurity {
        tls: Some(cluster.tls().expect("TLS files")),
        credentials: None,
    };
    let store = EtcdStore::connect(config(&cluster, security)).expect("connects over TLS");
    own_all_shards(&store);
    write_and_read(&store, "g1", 1);
    drop(store);
    // Credentials deployed before etcd's authentication is enabled: requests go without a
    // token (and a WARN says so).
    let store = connect_as(&cluster, USER, PASSWORD).expect("connects with a user");
    own_all_shards(&store);
    write_and_read(&store, "g2", 2);
    drop(store);

    // Authentication on, no user configured: etcd takes the client certificate's common
    // name as the user, here one whose role has readwrite on /t/.
    let cluster = EtcdCluster::secure(
        1,
        &SecureOptions {
            users: vec![TestUser::new(
                CLIENT_COMMON_NAME,
                "unused-password",
                Some("/t/"),
            )],
            auth_token_ttl_s: None,
            jwt: false,
        },
    )
    .expect("etcd starts with TLS and auth");
    let security = EtcdSecurity {
        tls: Some(cluster.tls().expect("TLS files")),
        credentials: None,
    };
    let store = EtcdStore::connect(config(&cluster, security)).expect("connects as the CN");
    own_all_shards(&store);
    write_and_read(&store, "g1", 1);
}

/// JWT tokens (what etcd recommends in production): they expire after their TTL whether used
/// or not, and carry the auth store's revision, so a user or role edited while Muster runs
/// makes etcd refuse them as old. Either way the client authenticates again.
#[test]
fn jwt_tokens_expired_or_older_than_the_auth_store_are_replaced() {
    let cluster = EtcdCluster::secure(
        1,
        &SecureOptions {
            users: vec![TestUser::new(USER, PASSWORD, Some("/t/"))],
            auth_token_ttl_s: Some(2),
            jwt: true,
        },
    )
    .expect("etcd starts with TLS and JWT auth");
    let store = connect_as(&cluster, USER, PASSWORD).expect("connects");
    own_all_shards(&store);
    write_and_read(&store, "g1", 1);
    let first = store.client().authentications();
    cluster
        .add_user(&TestUser::new("late", "late-password", Some("/late/")))
        .expect("root adds a user");
    let started = Instant::now();
    write_and_read(&store, "g2", 2);
    eprintln!(
        "first write after the auth change took {:?}",
        started.elapsed()
    );
    assert!(store.client().authentications() > first, "renewed as old");
    let second = store.client().authentications();
    std::thread::sleep(Duration::from_millis(2_600));
    write_and_read(&store, "g3", 3);
    assert!(
        store.client().authentications() > second,
        "renewed as expired"
    );
}
