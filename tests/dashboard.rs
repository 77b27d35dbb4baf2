//! The dashboard over the real server: its JSON over HTTP, and its pages in a real headless
//! browser (Debian's `chromium`; `.ci/run` installs it). The browser runs the page's script,
//! which fetches the JSON and builds the DOM; `--dump-dom` prints that DOM, so what is checked
//! is what a person would see, including that client-chosen strings stay text.
//!
//! Without chromium the browser tests fail, saying so: they never pass without having run.
//! `MUSTER_CHROMIUM` names another binary; `MUSTER_DASHBOARD_SCREENSHOTS=DIR` also writes
//! screenshots of the pages (desktop and phone sizes) there.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use common::*;
use muster_auth::TokenHash;
use muster_client::{
    Admin, Connection, ConnectionConfig, GroupMember, GroupProtocol, MemberConfig,
};
use muster_coordinator::quota::Quotas;
use muster_server::auth::Auth;
use muster_server::ServerThread;
use serde_json::Value;

// ------------------------------------------------------------------------------- HTTP

/// A GET with optional headers: (status, headers, body).
fn http_get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: muster\r\n{extra}Connection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, head.to_owned(), body.to_owned()))
}

fn get_json(addr: SocketAddr, path: &str) -> Result<(u16, Value)> {
    let (status, _, body) = http_get(addr, path, &[])?;
    let value = serde_json::from_str(&body).with_context(|| format!("{path}: {body}"))?;
    Ok((status, value))
}

/// Polls `path` until `done` holds of its JSON (at most 15 s).
async fn until_json(
    addr: SocketAddr,
    path: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, value) = get_json(addr, path)?;
        if status == 200 && done(&value) {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("{what}: never reached; last {path} ({status}): {value}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------- chromium

/// The browser: `MUSTER_CHROMIUM`, else `chromium` (or `chromium-browser`) on the PATH.
fn chromium() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("MUSTER_CHROMIUM") {
        return Ok(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    bail!(
        "chromium is not installed: the dashboard tests need a real headless browser \
         (`apt-get install chromium`, which .ci/run does; or set MUSTER_CHROMIUM)"
    )
}

/// Runs headless chromium on `url` with `args` (after the common ones); returns its stdout.
/// Its stdout goes to a file (a DOM can be larger than a pipe holds) and it is killed after
/// 60 s.
fn run_chromium(url: &str, args: &[&str]) -> Result<String> {
    let browser = chromium()?;
    let dir = tempfile::tempdir()?;
    let out_path = dir.path().join("stdout");
    let out = std::fs::File::create(&out_path)?;
    let profile = dir.path().join("profile");
    let mut child = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            // Timers and fetches run in virtual time: the page's first fetches complete and
            // its refresh timer fires before the DOM is taken.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", browser.display()))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("chromium did not finish with {url} within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    ensure!(status.success(), "chromium failed on {url}: {status}");
    Ok(std::fs::read_to_string(out_path)?)
}

/// The DOM of `url` after its scripts ran.
async fn dump_dom(url: String) -> Result<String> {
    tokio::task::spawn_blocking(move || run_chromium(&url, &["--dump-dom"])).await?
}

/// A screenshot of `url` at `width`×`height` into `path`.
async fn screenshot(url: String, path: PathBuf, width: u32, height: u32) -> Result<()> {
    tokio::task::spawn_blocking(move || {
        run_chromium(
            &url,
            &[
                &format!("--screenshot={}", path.display()),
                &format!("--window-size={width},{height}"),
            ],
        )
    })
    .await??;
    Ok(())
}

// ------------------------------------------------------------------------------ groups

fn admin_server() -> ServerThread {
    start_server_with(fast_config(), |o| {
        o.admin_listen = Some("127.0.0.1:0".into());
    })
}

/// A member of `group` on its own connection with client id `client_id`; its events are
/// drained (a revocation dropped lets the rebalance go on).
async fn member(
    addr: SocketAddr,
    group: &str,
    client_id: &str,
    topics: &[&str],
) -> Result<GroupMember> {
    member_with_session(addr, group, client_id, topics, Duration::from_secs(10)).await
}

async fn member_with_session(
    addr: SocketAddr,
    group: &str,
    client_id: &str,
    topics: &[&str],
    session: Duration,
) -> Result<GroupMember> {
    let connection =
        Connection::connect(ConnectionConfig::new(addr.to_string()).client_id(client_id)).await?;
    let (member, mut events) = MemberConfig::new(group, topics.iter().copied())
        .session_timeout(session)
        .heartbeat_interval(Duration::from_millis(100))
        .start(connection)?;
    tokio::spawn(async move { while events.recv().await.is_some() {} });
    Ok(member)
}

fn partitions_assigned(group: &Value) -> usize {
    group["assignment"]
        .as_array()
        .map(|topics| {
            topics
                .iter()
                .map(|t| t["partitions"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0)
}

/// Waits until `group` is Stable with `members` members owning `partitions` partitions.
async fn settled(
    admin: SocketAddr,
    group: &str,
    members: usize,
    partitions: usize,
) -> Result<Value> {
    let path = format!("/api/groups/{}", encode(group));
    until_json(
        admin,
        &path,
        &format!("{group} settled with {members}"),
        |g| {
            g["state"] == "Stable"
                && g["members_total"] == members
                && partitions_assigned(g) == partitions
                && g["members"].as_array().is_some_and(|ms| {
                    ms.iter()
                        .all(|m| !m["assignment"].as_array().is_some_and(Vec::is_empty))
                })
        },
    )
    .await
}

/// Percent-encodes everything but unreserved characters (as `encodeURIComponent` does, and
/// more).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A group id and client id a hostile client could choose: markup, were it ever parsed.
const HOSTILE_GROUP: &str = "<img src=x onerror=alert(1)>&\"'";
const HOSTILE_CLIENT: &str = "<b id=\"pwned\">bold</b>";

// ------------------------------------------------------------------------------- tests

#[tokio::test]
async fn the_pages_show_groups_members_and_assignment_in_a_real_browser() -> Result<()> {
    // Fail first and clearly when there is no browser, before anything else is set up.
    chromium()?;
    let server = admin_server();
    let admin = server.admin_addr().context("admin listener")?;
    let addr = server.local_addr();
    let setup = Admin::new(
        Connection::connect(ConnectionConfig::new(addr.to_string()).client_id("setup")).await?,
    );
    setup.ensure_topic("orders", 6).await?;
    setup.ensure_topic("audit", 2).await?;

    // Two members, then a third: a scripted rebalance.
    let topics = ["orders", "audit"];
    let mut members = vec![
        member(addr, "payments-eu", "payments-worker-1", &topics).await?,
        member(addr, "payments-eu", "payments-worker-2", &topics).await?,
    ];
    let before = settled(admin, "payments-eu", 2, 8).await?;
    members.push(member(addr, "payments-eu", "payments-worker-3", &topics).await?);
    let after = settled(admin, "payments-eu", 3, 8).await?;
    ensure!(
        after["generation"].as_i64() > before["generation"].as_i64(),
        "the third member made a new generation: {before} → {after}"
    );
    // And a member leaving: another generation, with its partitions moved.
    members.pop().context("the third member")?.close().await?;
    let after = settled(admin, "payments-eu", 2, 8).await?;
    let _billing = member(addr, "billing", "billing-1", &["orders"]).await?;
    let _hostile = member(addr, HOSTILE_GROUP, HOSTILE_CLIENT, &["audit"]).await?;
    settled(admin, "billing", 1, 6).await?;
    settled(admin, HOSTILE_GROUP, 1, 2).await?;

    // The list page: the script fetched /api/groups and built one row per group.
    let base = format!("http://{admin}");
    let list = dump_dom(format!("{base}/")).await?;
    ensure!(list.contains("id=\"groups\""), "no group table: {list}");
    for id in ["payments-eu", "billing"] {
        ensure!(
            list.contains(&format!("href=\"/groups/{id}\"")),
            "no row links to {id}: {list}"
        );
    }
    ensure!(list.contains("Stable"), "states shown: {list}");
    ensure!(
        list.contains("Showing 1–3 of 3 groups"),
        "the count: {list}"
    );
    // The hostile id is text in the page, never an element.
    ensure!(
        list.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "the hostile group id is shown as text: {list}"
    );
    ensure!(
        !list.contains("<img"),
        "no element came from a group id: {list}"
    );

    // The group page: members with client ids and hosts, the assignment by topic.
    let page = dump_dom(format!("{base}/groups/payments-eu")).await?;
    ensure!(page.contains("id=\"members\""), "no member table: {page}");
    for m in after["members"].as_array().context("members")? {
        let id = m["member_id"].as_str().context("member id")?;
        ensure!(page.contains(id), "member {id} missing: {page}");
    }
    for client in ["payments-worker-1", "payments-worker-2"] {
        ensure!(page.contains(client), "client {client} missing: {page}");
    }
    ensure!(page.contains("127.0.0.1"), "hosts shown: {page}");
    ensure!(page.contains("id=\"assignment\""), "no assignment: {page}");
    ensure!(page.contains("orders"), "topic shown: {page}");

    let hostile = dump_dom(format!("{base}/groups/{}", encode(HOSTILE_GROUP))).await?;
    ensure!(
        hostile.contains("&lt;b id=\"pwned\"&gt;bold&lt;/b&gt;"),
        "the hostile client id is shown as text: {hostile}"
    );
    ensure!(
        !hostile.contains("id=\"pwned\">") && !hostile.contains("<img"),
        "no element came from client data: {hostile}"
    );

    // The journal as a timeline, newest first: the third member's leave made the last
    // generation, its join the one before.
    ensure!(page.contains("id=\"journal\""), "no journal: {page}");
    let generation = after["generation"].as_i64().context("generation")?;
    let newest = page
        .find(&format!("Generation {generation}<"))
        .context("the last generation in the journal")?;
    let older = page
        .find(&format!("Generation {}<", generation - 1))
        .context("the one before it")?;
    ensure!(newest < older, "newest first: {page}");
    let left = page.find("member left").context("the leave's trigger")?;
    let joined = page.find("member joined").context("the join's trigger")?;
    ensure!(
        newest < left && left < older && older < joined,
        "in order: {page}"
    );
    ensure!(
        page[newest..older].contains("payments-worker-3 @ 127.0.0.1"),
        "the leave names the member's client and host: {page}"
    );
    ensure!(page.contains("id=\"why\""), "the diagnosis: {page}");

    // A member that stops rejoining: the page names it as the one the barrier waits for,
    // before the barrier gives up (30 s).
    let mut laggard = form_group(addr, "laggard", 2, 30_000, 30_000).await?;
    let _held = laggard[0].send_join().await?;
    let waited_for = laggard[1].id.clone();
    until_json(admin, "/api/groups/laggard", "the barrier waits", |g| {
        g["diagnosis"]["rebalance"]["waiting_for"]
            .as_array()
            .is_some_and(|w| w.len() == 1 && w[0]["member_id"] == waited_for.as_str())
    })
    .await?;
    let stuck = dump_dom(format!("{base}/groups/laggard")).await?;
    let waiting = stuck
        .split_once("id=\"waiting\"")
        .map(|(_, rest)| rest)
        .context("no list of members waited for")?;
    ensure!(
        waiting.contains(&waited_for),
        "the laggard {waited_for} is named: {stuck}"
    );
    ensure!(
        stuck.contains("Rebalancing:") || stuck.contains("Stuck:"),
        "{stuck}"
    );
    // A member that dies without leaving (its tasks stop, as under SIGKILL): after its session
    // timeout the journal's newest entry is its expiry, naming it, with the partitions moved.
    let second = Duration::from_secs(1);
    let mut expiring = Vec::new();
    for i in 1..=3 {
        let client = format!("expiry-worker-{i}");
        expiring.push(member_with_session(addr, "expiry", &client, &["orders"], second).await?);
        settled(admin, "expiry", i, 6).await?;
    }
    drop(expiring.pop());
    let expired = until_json(admin, "/api/groups/expiry", "the expiry", |g| {
        g["state"] == "Stable"
            && g["members_total"] == 2
            && g["journal"][0]["trigger"]["kind"] == "session_expired"
            && g["journal"][0]["moved"].as_u64() > Some(0)
    })
    .await?;
    let page = dump_dom(format!("{base}/groups/expiry")).await?;
    let newest = format!("Generation {}<", expired["generation"]);
    let entry = page
        .split_once(newest.as_str())
        .map(|(_, rest)| rest.split("Generation ").next().unwrap_or(rest))
        .with_context(|| format!("no journal entry for {newest}: {page}"))?;
    ensure!(
        entry.contains("session expired") && entry.contains("expiry-worker-3 @ 127.0.0.1"),
        "the expiry names the member: {entry}"
    );
    ensure!(
        entry.contains(&format!(
            "{} partition(s) moved",
            expired["journal"][0]["moved"]
        )),
        "the partitions moved: {entry}"
    );

    let list = dump_dom(format!("{base}/?state=PreparingRebalance")).await?;
    ensure!(
        list.contains("href=\"/groups/laggard\"") && !list.contains("href=\"/groups/billing\""),
        "the state filter from the address: {list}"
    );

    if let Some(dir) = std::env::var_os("MUSTER_DASHBOARD_SCREENSHOTS") {
        let dir = Path::new(&dir);
        screenshot(format!("{base}/"), dir.join("dash-list.png"), 1200, 800).await?;
        screenshot(
            format!("{base}/"),
            dir.join("dash-list-phone.png"),
            390,
            844,
        )
        .await?;
        screenshot(
            format!("{base}/groups/payments-eu"),
            dir.join("dash-group.png"),
            1200,
            1100,
        )
        .await?;
        screenshot(
            format!("{base}/groups/payments-eu"),
            dir.join("dash-group-phone.png"),
            390,
            844,
        )
        .await?;
        // The whole page at phone width, and a group waiting for a laggard.
        screenshot(
            format!("{base}/groups/payments-eu"),
            dir.join("dash-group-phone-full.png"),
            390,
            2600,
        )
        .await?;
        screenshot(
            format!("{base}/groups/laggard"),
            dir.join("dash-laggard.png"),
            1200,
            800,
        )
        .await?;
        screenshot(
            format!("{base}/groups/laggard"),
            dir.join("dash-laggard-phone.png"),
            390,
            844,
        )
        .await?;
    }
    for m in members {
        m.close().await?;
    }
    Ok(())
}

#[tokio::test]
async fn the_list_is_paged_filtered_and_bounded() -> Result<()> {
    let server = admin_server();
    let admin = server.admin_addr().context("admin listener")?;
    let mut conn = Conn::connect(server.local_addr(), "committer").await?;
    ensure!(
        as_create_topics(conn.call(create_topics(&[(TOPIC, 1)])).await?)
            .results
            .iter()
            .all(|r| r.error_code == 0)
    );
    // Offset commits at generation -1 create member-less groups: 25 of them, cheaply.
    for i in 0..25 {
        let group = if i % 5 == 0 {
            format!("Audit-{i:02}")
        } else {
            format!("orders-{i:02}")
        };
        let r = as_commit(
            conn.call(commit(&group, -1, "", &[(TOPIC, 0, 1, None)]))
                .await?,
        );
        ensure!(commit_codes(&r).iter().all(|(_, _, c)| *c == 0), "{r:?}");
    }
    let ids = |v: &Value| -> Vec<String> {
        v["groups"]
            .as_array()
            .map(|gs| {
                gs.iter()
                    .filter_map(|g| g["group_id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (status, first) = get_json(admin, "/api/groups?limit=10")?;
    ensure!(status == 200, "{first}");
    ensure!(first["total"] == 25 && first["matching"] == 25, "{first}");
    ensure!(
        first["offset"] == 0 && first["more_after"] == true,
        "{first}"
    );
    let page1 = ids(&first);
    ensure!(page1.len() == 10, "{first}");
    let mut sorted = page1.clone();
    sorted.sort();
    ensure!(
        page1 == sorted && page1[0] == "Audit-00",
        "in id order: {page1:?}"
    );

    let last = page1.last().context("a last id")?;
    let (_, second) = get_json(
        admin,
        &format!("/api/groups?limit=10&after={}", encode(last)),
    )?;
    ensure!(second["offset"] == 10, "{second}");
    let page2 = ids(&second);
    ensure!(page2.len() == 10 && page2[0] > *last, "{page2:?}");
    let (_, back) = get_json(
        admin,
        &format!("/api/groups?limit=10&before={}", encode(&page2[0])),
    )?;
    ensure!(ids(&back) == page1 && back["offset"] == 0, "{back}");
    let (_, third) = get_json(
        admin,
        &format!(
            "/api/groups?limit=10&after={}",
            encode(page2.last().context("last")?)
        ),
    )?;
    ensure!(
        ids(&third).len() == 5 && third["more_after"] == false,
        "{third}"
    );

    // The filter ignores case; the state filter and counts per state.
    let (_, audit) = get_json(admin, "/api/groups?filter=aUdIt")?;
    ensure!(audit["matching"] == 5 && audit["total"] == 25, "{audit}");
    let (_, empty) = get_json(admin, "/api/groups?state=Empty&limit=1")?;
    ensure!(empty["matching"] == 25 && ids(&empty).len() == 1, "{empty}");
    let (_, stable) = get_json(admin, "/api/groups?state=Stable")?;
    ensure!(stable["matching"] == 0, "{stable}");

    // Bad queries are 400 with a reason; a page is never larger than 500.
    for bad in [
        "/api/groups?limit=0",
        "/api/groups?limit=501",
        "/api/groups?state=Happy",
    ] {
        let (status, body) = get_json(admin, bad)?;
        ensure!(
            status == 400 && body["error"].is_string(),
            "{bad}: {status} {body}"
        );
    }
    let long = "x".repeat(2000);
    let (status, _) = get_json(admin, &format!("/api/groups?filter={long}"))?;
    ensure!(status == 400, "a 2000-byte filter is refused");

    // A group that does not exist, and an id that does not decode.
    let (status, _) = get_json(admin, "/api/groups/nobody-here")?;
    ensure!(status == 404);
    let (status, _) = get_json(admin, "/api/groups/%FF")?;
    ensure!(status == 400);

    // The pages and assets carry the CSP; nothing answers unknown paths but 404.
    let (status, head, body) = http_get(admin, "/", &[])?;
    ensure!(
        status == 200 && body.contains("/assets/dashboard.js"),
        "{head}"
    );
    ensure!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{head}"
    );
    let (status, _, js) = http_get(admin, "/assets/dashboard.js", &[])?;
    ensure!(status == 200, "the script is served");
    for sink in [
        ".innerHTML",
        ".outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        ensure!(
            !js.contains(sink),
            "the script never parses strings as markup or code: {sink}"
        );
    }
    let (status, _, _) = http_get(admin, "/nothing", &[])?;
    ensure!(status == 404);
    Ok(())
}

#[tokio::test]
async fn with_an_auth_file_the_json_needs_a_token_and_shows_that_principals_groups() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("auth.toml");
    let rules = format!(
        "[[principals]]\nname = \"orders\"\ntoken_sha256 = \"{}\"\n\n\
         [[principals]]\nname = \"ops\"\ntoken_sha256 = \"{}\"\n\n\
         [[acls]]\nprincipal = \"orders\"\nresource = \"group\"\npattern = \"orders-*\"\n\
         operations = [\"read\"]\n\n\
         [[acls]]\nprincipal = \"orders\"\nresource = \"topic\"\npattern = \"*\"\n\
         operations = [\"read\"]\n\n\
         [[acls]]\nprincipal = \"ops\"\nresource = \"cluster\"\npattern = \"*\"\n\
         operations = [\"admin\"]\n",
        TokenHash::of("orders-token").to_hex(),
        TokenHash::of("ops-token").to_hex(),
    );
    std::fs::write(&file, rules)?;
    let auth = Arc::new(Auth::from_file(&file, Quotas::default())?);
    let server = start_server_with(fast_config(), |o| {
        o.admin_listen = Some("127.0.0.1:0".into());
        o.auth = auth;
    });
    let admin = server.admin_addr().context("admin listener")?;
    // The ops principal creates one group each side of the orders principal's pattern
    // (an offset commit at generation -1 creates a member-less group).
    let mut conn = Conn::connect_raw(server.local_addr()).await?;
    let hello = conn
        .call(muster_protocol::Request::Hello(
            muster_protocol::HelloRequest {
                protocol_version: 1,
                client_id: "ops".into(),
                auth_token: Some("ops-token".into()),
            },
        ))
        .await?;
    ensure!(as_hello(hello).error_code == 0, "ops says hello");
    ensure!(
        as_create_topics(conn.call(create_topics(&[(TOPIC, 1)])).await?)
            .results
            .iter()
            .all(|r| r.error_code == 0)
    );
    for group in ["orders-eu", "billing-eu"] {
        let r = as_commit(
            conn.call(commit(group, -1, "", &[(TOPIC, 0, 1, None)]))
                .await?,
        );
        let codes = commit_codes(&r);
        ensure!(codes.iter().all(|(_, _, c)| *c == 0), "{group}: {codes:?}");
    }

    // No token, a wrong one: 401 and the pages still load (they ask for the token).
    let (status, _, body) = http_get(admin, "/api/groups", &[])?;
    ensure!(status == 401 && body.contains("token"), "{status} {body}");
    let (status, _, _) = http_get(admin, "/api/groups", &[("Authorization", "Bearer wrong")])?;
    ensure!(status == 401);
    let (status, _, _) = http_get(admin, "/", &[])?;
    ensure!(status == 200);

    let list = |token: &str| -> Result<Value> {
        let (status, _, body) = http_get(
            admin,
            "/api/groups",
            &[("Authorization", &format!("Bearer {token}"))],
        )?;
        ensure!(status == 200, "{status} {body}");
        Ok(serde_json::from_str(&body)?)
    };
    let seen: Vec<String> = list("orders-token")?["groups"]
        .as_array()
        .context("groups")?
        .iter()
        .filter_map(|g| g["group_id"].as_str().map(str::to_owned))
        .collect();
    ensure!(
        seen == ["orders-eu"],
        "orders sees its groups only: {seen:?}"
    );
    ensure!(list("ops-token")?["total"] == 2);
    let (status, _, _) = http_get(
        admin,
        "/api/groups/billing-eu",
        &[("Authorization", "Bearer orders-token")],
    )?;
    ensure!(status == 403, "describing another's group is refused");
    Ok(())
}

/// A consumer-protocol group (protocol-v1 §7) on the dashboard: its JSON carries the group and
/// target epochs and each member's epoch and target, and the page shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_group_shows_its_epochs_and_targets() -> Result<()> {
    chromium()?;
    let mut config = fast_config();
    config.consumer.heartbeat_interval_ms = 100;
    let server = start_server_with(config, |o| {
        o.admin_listen = Some("127.0.0.1:0".into());
    });
    let admin = server.admin_addr().context("admin listener")?;
    let addr = server.local_addr();
    let setup = Admin::new(
        Connection::connect(ConnectionConfig::new(addr.to_string()).client_id("setup")).await?,
    );
    setup.ensure_topic("events", 6).await?;
    let mut members = Vec::new();
    for client_id in ["stream-worker-1", "stream-worker-2"] {
        let connection =
            Connection::connect(ConnectionConfig::new(addr.to_string()).client_id(client_id))
                .await?;
        let (member, mut events) = MemberConfig::new("streams", ["events"])
            .group_protocol(GroupProtocol::Consumer)
            .start(connection)?;
        tokio::spawn(async move { while events.recv().await.is_some() {} });
        members.push(member);
    }
    let group = settled(admin, "streams", 2, 6).await?;
    let consumer = &group["consumer"];
    ensure!(
        consumer["group_epoch"] == 2,
        "two joins, two epochs: {group}"
    );
    ensure!(consumer["assignment_epoch"] == 2, "{group}");
    let listed = consumer["members"].as_array().context("consumer members")?;
    ensure!(listed.len() == 2, "{group}");
    for m in listed {
        ensure!(m["member_epoch"] == 2, "{m}");
        ensure!(m["revoking"].as_array().is_some_and(Vec::is_empty), "{m}");
        ensure!(m["awaiting"].as_array().is_some_and(Vec::is_empty), "{m}");
        let target: usize = m["target"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| t["partitions"].as_array().map_or(0, Vec::len))
                    .sum()
            })
            .unwrap_or(0);
        ensure!(target == 3, "each member's target is half: {m}");
    }
    ensure!(
        group["journal"][0]["generation"] == 2,
        "one entry per epoch: {group}"
    );

    // A classic group has none.
    let _classic = member(addr, "classic-group", "classic-1", &["events"]).await?;
    let classic = settled(admin, "classic-group", 1, 6).await?;
    ensure!(classic["consumer"].is_null(), "{classic}");

    let page = dump_dom(format!("http://{admin}/groups/streams")).await?;
    for text in [
        "Group epoch",
        "Target epoch",
        "Giving up",
        "Waiting for",
        "stream-worker-1",
    ] {
        ensure!(page.contains(text), "the page shows {text:?}: {page}");
    }
    for m in members {
        m.close().await?;
    }
    Ok(())
}
