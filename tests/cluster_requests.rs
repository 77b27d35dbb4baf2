//! FindCoordinator and DescribeCluster at a single `musterd` (protocol §6.19), over real TCP
//! with an in-process server: the node names itself (its node id and advertised address) for
//! every valid group id and answers INVALID_GROUP_ID for the others, without creating a group;
//! it describes a cluster of one node owning shard 0; `advertise` overrides the address it
//! names; both requests need a Hello first, but no ACL; with TLS the advertised port is the
//! TLS listener's.

mod common;
mod pki;

use std::sync::Arc;

use anyhow::{ensure, Context as _, Result};
use common::*;
use muster_auth::TokenHash;
use muster_coordinator::quota::Quotas;
use muster_protocol::*;
use muster_server::auth::Auth;
use muster_server::node::{host_name, HostPort, NodeOptions};
use muster_server::tls::TlsSettings;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

fn named(node_id: &str, cluster: &str) -> NodeOptions {
    NodeOptions {
        node_id: Some(node_id.into()),
        cluster_name: cluster.into(),
        ..NodeOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_coordinator_names_this_node_at_its_listen_address() -> Result<()> {
    let server = start_server_with(fast_config(), |o| o.node = named("node-a", "muster"));
    let port = server.local_addr().port();
    let mut conn = Conn::connect(server.local_addr(), "finder").await?;
    for group in ["orders", "a group that does not exist", "ü-ñ"] {
        let found = as_find_coordinator(conn.call(find_coordinator(group)).await?);
        ensure!(
            found
                == FindCoordinatorResponse {
                    error_code: 0,
                    node_id: "node-a".into(),
                    host: "127.0.0.1".into(),
                    port,
                },
            "{group:?}: {found:?}"
        );
    }
    // Asking where a group is creates nothing.
    let listed = as_list(conn.call(list_groups(&[])).await?);
    ensure!(listed.groups.is_empty(), "{listed:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_coordinator_refuses_an_invalid_group_id() -> Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "finder").await?;
    for key in [String::new(), "tab\there".into(), "g".repeat(256)] {
        let found = as_find_coordinator(conn.call(find_coordinator(&key)).await?);
        ensure!(
            found
                == FindCoordinatorResponse {
                    error_code: code(ErrorCode::InvalidGroupId),
                    node_id: String::new(),
                    host: String::new(),
                    port: 0,
                },
            "{key:?}: {found:?}"
        );
    }
    // The longest valid id is answered.
    let found = as_find_coordinator(conn.call(find_coordinator(&"g".repeat(255))).await?);
    ensure!(found.error_code == 0, "{found:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cluster_is_one_node_owning_shard_zero() -> Result<()> {
    let server = start_server_with(fast_config(), |o| o.node = named("node-a", "prod-eu"));
    let mut conn = Conn::connect(server.local_addr(), "describer").await?;
    let described = as_describe_cluster(conn.call(describe_cluster()).await?);
    ensure!(
        described
            == DescribeClusterResponse {
                error_code: 0,
                cluster: "prod-eu".into(),
                shards: 1,
                nodes: vec![ClusterNode {
                    node_id: "node-a".into(),
                    host: "127.0.0.1".into(),
                    port: server.local_addr().port(),
                    shards: vec![0],
                }],
            },
        "{described:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_are_the_host_name_and_cluster_muster() -> Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "describer").await?;
    let described = as_describe_cluster(conn.call(describe_cluster()).await?);
    ensure!(described.cluster == "muster", "{described:?}");
    let node = described.nodes.first().context("one node")?;
    ensure!(node.node_id == host_name(), "{described:?}");
    let found = as_find_coordinator(conn.call(find_coordinator("orders")).await?);
    ensure!(found.node_id == node.node_id, "{found:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advertise_overrides_the_address_clients_are_told() -> Result<()> {
    let advertise: HostPort = "muster.example:9999".parse()?;
    let server = start_server_with(fast_config(), |o| {
        o.node = NodeOptions {
            advertise: Some(advertise),
            ..named("node-a", "muster")
        };
    });
    let mut conn = Conn::connect(server.local_addr(), "finder").await?;
    let found = as_find_coordinator(conn.call(find_coordinator("orders")).await?);
    ensure!(
        (found.host.as_str(), found.port) == ("muster.example", 9999),
        "{found:?}"
    );
    let described = as_describe_cluster(conn.call(describe_cluster()).await?);
    let node = described.nodes.first().context("one node")?;
    ensure!(
        (node.host.as_str(), node.port) == ("muster.example", 9999),
        "{described:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipv6_advertised_address_goes_on_the_wire_without_brackets() -> Result<()> {
    let server = start_server_with(fast_config(), |o| {
        o.node.advertise = Some(HostPort {
            host: "fd00::7".into(),
            port: 7450,
        })
    });
    let mut conn = Conn::connect(server.local_addr(), "finder").await?;
    let found = as_find_coordinator(conn.call(find_coordinator("orders")).await?);
    ensure!(
        (found.host.as_str(), found.port) == ("fd00::7", 7450),
        "{found:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_need_a_hello_first() -> Result<()> {
    let server = start_server(fast_config());
    for request in [find_coordinator("orders"), describe_cluster()] {
        let mut conn = Conn::connect_raw(server.local_addr()).await?;
        let refused = as_error(conn.call(request).await?);
        ensure!(
            refused.error_code == code(ErrorCode::IllegalState),
            "{refused:?}"
        );
        conn.closed().await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_without_acls_may_send_both() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("auth.toml");
    std::fs::write(
        &file,
        format!(
            "[[principals]]\nname = \"nobody\"\ntoken_sha256 = \"{}\"\n",
            TokenHash::of("nobody-token").to_hex()
        ),
    )?;
    let auth = Arc::new(Auth::from_file(&file, Quotas::default())?);
    let server = start_server_with(fast_config(), |o| {
        o.auth = auth;
        o.node = named("node-a", "muster");
    });
    let addr = server.local_addr();

    // Without a valid token there is no session to ask in.
    let mut stranger = Conn::connect_raw(addr).await?;
    let hello = as_hello(stranger.call(hello_with_token(Some("wrong"))).await?);
    ensure!(
        hello.error_code == code(ErrorCode::AuthenticationFailed),
        "{hello:?}"
    );

    let mut conn = Conn::connect_raw(addr).await?;
    let hello = as_hello(conn.call(hello_with_token(Some("nobody-token"))).await?);
    ensure!(hello.error_code == 0, "{hello:?}");
    // The principal may touch no group...
    let heartbeat = as_heartbeat(conn.call(heartbeat("orders", 1, "m")).await?);
    ensure!(
        heartbeat == code(ErrorCode::GroupAuthorizationFailed),
        "{heartbeat}"
    );
    // ...but may find any group's coordinator and describe the cluster.
    let found = as_find_coordinator(conn.call(find_coordinator("orders")).await?);
    ensure!(
        found.error_code == 0 && found.node_id == "node-a" && found.port == addr.port(),
        "{found:?}"
    );
    let described = as_describe_cluster(conn.call(describe_cluster()).await?);
    ensure!(
        described.error_code == 0 && described.nodes.len() == 1,
        "{described:?}"
    );
    Ok(())
}

fn hello_with_token(token: Option<&str>) -> Request {
    Request::Hello(HelloRequest {
        protocol_version: 1,
        client_id: "cluster-test".into(),
        auth_token: token.map(str::to_owned),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_the_advertised_port_is_the_tls_port() -> Result<()> {
    let pki = pki::Pki::new("findcoord");
    let issued = pki.server();
    let tls = TlsSettings::load(&issued.cert, &issued.key, None)?;
    let server = start_server_with(fast_config(), |o| {
        o.tls = Some(tls);
        o.node = named("node-a", "muster");
    });
    let addr = server.local_addr();

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(pki.ca_path())? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost")?, tcp)
        .await
        .context("TLS handshake")?;
    let mut conn = Conn::over(stream);
    let hello = as_hello(conn.call(hello(1, "tls-finder")).await?);
    ensure!(hello.error_code == 0, "{hello:?}");
    let found = as_find_coordinator(conn.call(find_coordinator("orders")).await?);
    ensure!(
        found.error_code == 0 && found.port == addr.port() && found.host == "127.0.0.1",
        "{found:?}"
    );
    Ok(())
}
