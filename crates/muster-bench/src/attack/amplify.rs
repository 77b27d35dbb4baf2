//! The amplification attacks: small requests that ask for a lot. Each request kind that names
//! many things (or asks about everything) is sent at its limit, pipelined, and the bytes of
//! the answers are counted against the bytes sent (`answer_bytes` / `request_bytes` in the
//! outcome's extras).
//!
//! - `amplify`: DescribeGroups, ConsumerGroupDescribe and DeleteGroups naming as many distinct
//!   groups as one request may; DescribeTopics and ListGroups of everything; GroupHistory and
//!   GroupDiagnosis of a victim's group; OffsetFetch, OffsetHistory (every entry), an OffsetReset
//!   dry run and OffsetRestore's listing of a group with 1 000 partitions of 1 000-byte
//!   metadata, committed three times.
//! - `simulate`: GroupSimulate of the attacker's own group (one member subscribed to one
//!   topic) with the most members one request may add and the topic grown to `i32::MAX`
//!   partitions: the request is a few hundred bytes, an assignment of it would be billions of
//!   entries.

use std::sync::Arc;

use anyhow::{Context as _, Result};
use muster_protocol::{
    ConsumerGroupDescribeRequest, DeleteGroupsRequest, DescribeGroupsRequest,
    DescribeTopicsRequest, GroupDiagnosisRequest, GroupHistoryRequest, GroupSimulateRequest,
    ListGroupsRequest, OffsetFetchRequest, OffsetHistoryRequest, OffsetResetRequest,
    OffsetRestoreRequest, ResetTo, Response, TopicInfo,
};

use super::requests::seed_offsets;
use super::{fixed_client, frame, hammer, join, Env, Frame, Hammer, Tally, STALL};
use crate::client::Conn;

/// Group ids one request names (the server's default `max_groups_per_request`).
const IDS_PER_REQUEST: usize = 1_000;

/// Members plus topics one GroupSimulate may name (the server's ceiling on a group's size,
/// what one answer can encode: `MAX_ENCODABLE_GROUP_SIZE` in muster-coordinator).
const SIMULATE_LIMIT: u32 = 26_214;

/// Answers each amplification connection keeps in flight.
const DEPTH: usize = 8;

/// The `amplify` attack (module docs).
pub(super) async fn amplify(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-amp", env.run_id);
    // Three commits of every partition: three history entries each.
    for _ in 0..3 {
        seed_offsets(env, tally, &group, 1_000, 1_000).await?;
    }
    // The victims' groups are `<prefix>0`, `<prefix>1`, …: name them and more.
    let prefix = env
        .victim_group
        .trim_end_matches(|c: char| c.is_ascii_digit());
    let ids: Vec<String> = (0..IDS_PER_REQUEST)
        .map(|k| format!("{prefix}{k}"))
        .collect();
    let missing: Vec<String> = (0..IDS_PER_REQUEST)
        .map(|k| format!("{}-atk-absent-{k}", env.run_id))
        .collect();
    let mut frames: Vec<Frame> = vec![
        frame(DescribeGroupsRequest {
            group_ids: ids.clone(),
        })?,
        frame(ConsumerGroupDescribeRequest { group_ids: ids })?,
        frame(DeleteGroupsRequest { group_ids: missing })?,
        frame(DescribeTopicsRequest { topics: None })?,
        frame(ListGroupsRequest { states: Vec::new() })?,
        frame(GroupHistoryRequest {
            group_id: env.victim_group.clone(),
            limit: 0,
        })?,
        frame(GroupDiagnosisRequest {
            group_id: env.victim_group.clone(),
        })?,
        frame(OffsetFetchRequest {
            group_id: group.clone(),
            topics: None,
        })?,
    ];
    frames.extend(offset_data_frames(&group)?);
    let frames = Arc::new(frames);
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: DEPTH,
            client_id: fixed_client("atk-amplify"),
            recycle_after: 0,
            next: Arc::new(move |i| {
                let k = usize::try_from(i).unwrap_or(0) % frames.len();
                frames.get(k).cloned().context("no frame")
            }),
        },
    )
    .await
}

/// The requests whose answers list everything `group`'s offsets hold: its whole offset
/// history, an OffsetReset dry run of every partition, and OffsetRestore's listing.
pub(super) fn offset_data_frames(group: &str) -> Result<Vec<Frame>> {
    Ok(vec![
        frame(OffsetHistoryRequest {
            group_id: group.to_owned(),
            topic: None,
            partition: None,
            limit: 0,
        })?,
        frame(OffsetResetRequest {
            group_id: group.to_owned(),
            to: ResetTo::EarliestRecorded,
            topics: Vec::new(),
            execute: false,
        })?,
        frame(OffsetRestoreRequest {
            group_id: group.to_owned(),
            execute: false,
        })?,
    ])
}

/// The `simulate` attack (module docs).
pub(super) async fn simulate(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-sim", env.run_id);
    // One member subscribed to topic `atk`: a JoinGroup is enough (the simulation reads the
    // members' subscriptions, not their assignment). The second join waits out the new
    // group's initial rebalance delay (3 s by default).
    let Ok(conn) = Conn::connect(env.addr, "atk-sim-setup").await else {
        tally.bump(|o| &mut o.connect_failures);
        return Ok(());
    };
    let mut member_id = String::new();
    for _ in 0..2 {
        match conn
            .call_within(5 * STALL, join(group.clone(), member_id.clone(), None))
            .await
        {
            Ok(Response::JoinGroup(joined)) => member_id = joined.member_id,
            Ok(other) => tally.answer(&other),
            Err(_) => tally.bump(|o| &mut o.stalls),
        }
    }
    let request = frame(GroupSimulateRequest {
        group_id: group,
        remove_members: Vec::new(),
        // The request limit counts added members and grown topics together.
        add_members: SIMULATE_LIMIT - 1,
        partitions: vec![TopicInfo {
            topic: "atk".to_owned(),
            partitions: i32::MAX,
        }],
    })?;
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 1,
            client_id: fixed_client("atk-simulate"),
            recycle_after: 0,
            next: Arc::new(move |_| Ok(Arc::clone(&request))),
        },
    )
    .await
}
