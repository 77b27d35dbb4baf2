//! OffsetReset against the real `musterd` binary (issue #22): SIGKILL while an executed reset
//! is being written leaves either every old offset or every new one, never a mix; and a reset
//! undone by a reset to the time just before it gives back, byte for byte, what OffsetFetch
//! answered before.

mod support;

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use muster_protocol::*;
use support::{start, Conn};

const GROUP: &str = "reset-crash";
const TOPIC: &str = "events";
const PARTITIONS: i32 = 5_000;

fn commit_all(addr: SocketAddr, offset: impl Fn(i32) -> i64) -> Result<()> {
    let mut conn = Conn::connect(addr)?;
    match conn.call(Request::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            topic: TOPIC.into(),
            partitions: (0..PARTITIONS)
                .map(|p| OffsetCommitPartition {
                    partition: p,
                    offset: offset(p),
                    metadata: Some(format!("m{p}")),
                })
                .collect(),
        }],
    }))? {
        Response::OffsetCommit(r) if r.topics[0].partitions.iter().all(|p| p.error_code == 0) => {}
        other => bail!("OffsetCommit: {:?}", other.error_code()),
    }
    Ok(())
}

fn fetch_all(addr: SocketAddr) -> Result<OffsetFetchResponse> {
    let mut conn = Conn::connect(addr)?;
    match conn.call(Request::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: None,
    }))? {
        Response::OffsetFetch(r) => Ok(r),
        other => bail!("OffsetFetch: {other:?}"),
    }
}

fn reset(conn: &mut Conn, to: ResetTo, execute: bool) -> Result<OffsetResetResponse> {
    match conn.call(Request::OffsetReset(OffsetResetRequest {
        group_id: GROUP.into(),
        to,
        topics: Vec::new(),
        execute,
    }))? {
        Response::OffsetReset(r) => Ok(r),
        other => bail!("OffsetReset: {other:?}"),
    }
}

fn offsets(r: &OffsetFetchResponse) -> Vec<i64> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.offset))
        .collect()
}

#[test]
fn sigkill_during_an_executed_reset_leaves_the_old_offsets_or_the_new_never_a_mix() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let old = |p: i32| 1_000 + i64::from(p);
    // How long an executed reset of every partition takes on this machine, answer included:
    // the kills below fall before, during and after its write.
    let took = {
        let (mut child, addr) = start(dir.path())?;
        commit_all(addr, old)?;
        let mut conn = Conn::connect(addr)?;
        let started = Instant::now();
        let done = reset(&mut conn, ResetTo::Offset { offset: 7 }, true)?;
        let took = started.elapsed();
        assert_eq!(done.error_code, 0, "{:?}", done.error_message);
        child.kill()?;
        child.wait()?;
        took
    };
    let mut saw_old = false;
    let mut saw_new = false;
    for (round, eighths) in [0u32, 2, 4, 5, 6, 7, 8, 12].into_iter().enumerate() {
        let (mut child, addr) = start(dir.path())?;
        // The old offsets again (the previous round may have left the new ones).
        commit_all(addr, old)?;
        let mut conn = Conn::connect(addr)?;
        conn.send(Request::OffsetReset(OffsetResetRequest {
            group_id: GROUP.into(),
            to: ResetTo::Offset { offset: 7 },
            topics: Vec::new(),
            execute: true,
        }))?;
        std::thread::sleep(took * eighths / 8);
        child.kill().context("SIGKILL musterd")?;
        child.wait()?;
        let (mut child, addr) = start(dir.path())?;
        let now = offsets(&fetch_all(addr)?);
        assert_eq!(
            now.len(),
            PARTITIONS as usize,
            "round {round}: every partition kept one"
        );
        let all_old = now.iter().enumerate().all(|(p, &o)| o == old(p as i32));
        let all_new = now.iter().all(|&o| o == 7);
        assert!(
            all_old || all_new,
            "round {round}: a mix of old and new offsets after SIGKILL"
        );
        saw_old |= all_old;
        saw_new |= all_new;
        child.kill()?;
        child.wait()?;
    }
    eprintln!(
        "a reset took {took:?}; after SIGKILL: old offsets seen {saw_old}, new offsets seen {saw_new}"
    );
    // Killed well after the answer, the reset is there: the check above saw both sides.
    assert!(
        saw_old && saw_new,
        "the kills missed one side: old {saw_old}, new {saw_new}"
    );
    Ok(())
}

#[test]
fn a_reset_undone_by_a_reset_to_just_before_it_restores_the_first_state_byte_for_byte() -> Result<()>
{
    let dir = tempfile::tempdir()?;
    let (mut child, addr) = start(dir.path())?;
    commit_all(addr, |p| i64::from(p) * 3)?;
    let before = fetch_all(addr)?;
    let mut conn = Conn::connect(addr)?;
    // A dry run changes nothing.
    let dry = reset(&mut conn, ResetTo::ShiftBy { delta: -2 }, false)?;
    assert_eq!(dry.error_code, 0, "{dry:?}");
    assert!(!dry.executed);
    assert_eq!(dry.topics[0].partitions[5].current, 15);
    assert_eq!(dry.topics[0].partitions[5].new, 13);
    assert_eq!(fetch_all(addr)?, before, "a dry run changes nothing");
    let done = reset(&mut conn, ResetTo::ShiftBy { delta: -2 }, true)?;
    assert_eq!(done.error_code, 0, "{done:?}");
    assert!(done.executed);
    assert_ne!(fetch_all(addr)?, before);
    let undo = reset(
        &mut conn,
        ResetTo::Time {
            at_ms: done.recorded_at_ms - 1,
        },
        true,
    )?;
    assert_eq!(undo.error_code, 0, "{undo:?}");
    // The undo survives a restart too.
    child.kill()?;
    child.wait()?;
    let (mut child, addr) = start(dir.path())?;
    let mut a = Vec::new();
    let mut b = Vec::new();
    encode_response_payload(
        &ResponseFrame::new(0, Response::OffsetFetch(before)),
        &mut a,
    )?;
    encode_response_payload(
        &ResponseFrame::new(0, Response::OffsetFetch(fetch_all(addr)?)),
        &mut b,
    )?;
    assert!(
        a == b,
        "OffsetFetch after the undo differs from before the reset"
    );
    child.kill()?;
    child.wait()?;
    Ok(())
}
