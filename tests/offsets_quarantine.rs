//! The expiry quarantine over TCP (issue #22, protocol §6.25), with retention and grace
//! periods of a few hundred milliseconds: an idle group's offsets leave OffsetFetch's sight
//! but are not lost; `OffsetRestore` brings them back whole; a member joining the group gets
//! them back by itself (and the journal says so); and once the grace period is over they are
//! dropped for good and the group goes.

mod common;

use std::time::{Duration, Instant};

use common::*;
use muster_protocol::*;

const GROUP: &str = "idle-over-the-weekend";
const RETENTION_MS: u64 = 300;
const GRACE_MS: u64 = 1_500;

fn config() -> muster_coordinator::GroupConfig {
    muster_coordinator::GroupConfig {
        offsets_retention_ms: RETENTION_MS,
        empty_group_removal_ms: RETENTION_MS,
        offsets: muster_coordinator::OffsetsConfig {
            quarantine_ms: GRACE_MS,
            ..muster_coordinator::OffsetsConfig::default()
        },
        ..fast_config()
    }
}

async fn fetch_all(conn: &mut Conn) -> anyhow::Result<Vec<((String, i32), i64)>> {
    let mut all: Vec<_> = fetched(&as_fetch(conn.call(fetch(GROUP, None)).await?))
        .into_iter()
        .map(|(k, (offset, _))| (k, offset))
        .collect();
    all.sort();
    Ok(all)
}

async fn restore(conn: &mut Conn, execute: bool) -> anyhow::Result<OffsetRestoreResponse> {
    match conn
        .call(Request::OffsetRestore(OffsetRestoreRequest {
            group_id: GROUP.into(),
            execute,
        }))
        .await?
    {
        Response::OffsetRestore(r) => Ok(r),
        other => anyhow::bail!("OffsetRestore: {other:?}"),
    }
}

/// Polls OffsetFetch until it answers nothing (retention took everything), at most 10 s.
async fn until_expired(conn: &mut Conn) -> anyhow::Result<()> {
    let start = Instant::now();
    while !fetch_all(conn).await?.is_empty() {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(10),
            "offsets never expired"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(())
}

fn partitions_held(r: &OffsetRestoreResponse) -> Vec<(i32, i64)> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.offset)))
        .collect()
}

#[tokio::test]
async fn an_idle_groups_offsets_are_quarantined_restored_by_command_and_by_a_join_then_dropped(
) -> anyhow::Result<()> {
    let server = start_server(config());
    let addr = server.local_addr();
    let mut conn = Conn::connect(addr, "ops").await?;
    let committed = as_commit(
        conn.call(commit(
            GROUP,
            -1,
            "",
            &[(TOPIC, 0, 41, Some("m0".into())), (TOPIC, 1, 7, None)],
        ))
        .await?,
    );
    assert!(commit_codes(&committed).iter().all(|(_, _, c)| *c == 0));
    let before = fetch_all(&mut conn).await?;
    assert_eq!(before.len(), 2);

    // Retention passes: OffsetFetch no longer answers them, but the quarantine holds them.
    until_expired(&mut conn).await?;
    let held = restore(&mut conn, false).await?;
    assert_eq!(held.error_code, 0);
    assert!(!held.executed);
    assert_eq!(partitions_held(&held), [(0, 41), (1, 7)]);
    assert!(held.drop_at_ms >= held.quarantined_at_ms + GRACE_MS);

    // By command: back whole, metadata included.
    let restored = restore(&mut conn, true).await?;
    assert_eq!(restored.error_code, 0, "{:?}", restored.error_message);
    assert!(restored.executed);
    assert_eq!(fetch_all(&mut conn).await?, before);
    let meta = fetched(&as_fetch(conn.call(fetch(GROUP, None)).await?));
    assert_eq!(meta[&(TOPIC.to_owned(), 0)].1.as_deref(), Some("m0"));
    assert!(partitions_held(&restore(&mut conn, false).await?).is_empty());

    // Idle again: quarantined again; a member joining gets them back before it can fetch.
    until_expired(&mut conn).await?;
    let mut member = Member::pending(
        Conn::connect(addr, "joiner").await?,
        GROUP,
        LONG_MS,
        LONG_MS,
    )
    .await?;
    let joined = member.join().await?;
    assert_eq!(joined.error_code, 0);
    assert_eq!(
        fetch_all(&mut member.conn).await?,
        before,
        "restored on join"
    );
    let history = match conn
        .call(Request::GroupHistory(GroupHistoryRequest {
            group_id: GROUP.into(),
            limit: 1,
        }))
        .await?
    {
        Response::GroupHistory(r) => r,
        other => anyhow::bail!("GroupHistory: {other:?}"),
    };
    let detail = history.rebalances[0]
        .trigger
        .detail
        .clone()
        .unwrap_or_default();
    assert!(
        detail.contains("quarantined offsets restored"),
        "the journal says so: {detail:?}"
    );
    // The member leaves; the offsets expire into the quarantine once more and, with nobody
    // restoring them, are dropped after the grace period, and the empty group goes.
    let left = as_leave(conn.call(leave(GROUP, &[&member.id])).await?);
    assert_eq!(left.error_code, 0);
    until_expired(&mut conn).await?;
    assert_eq!(partitions_held(&restore(&mut conn, false).await?).len(), 2);
    let start = Instant::now();
    while restore(&mut conn, false).await?.error_code != code(ErrorCode::GroupIdNotFound) {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(10),
            "the quarantine was never dropped, or the group never removed"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(())
}
