//! The attacks that are one kind of oversized or repetitive request, sent through
//! [`super::hammer`]: garbage frames, the big OffsetCommit, repeated ids, JoinGroup floods,
//! huge ids and huge CreateTopics.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use muster_protocol::{
    CreateTopicsRequest, DescribeGroupsRequest, OffsetCommitPartition, OffsetFetchRequest,
    TopicInfo, TopicPartitions,
};

use super::{commit, fix_prefix, fixed_client, frame, hammer, join, long_id, noise, Env, Frame};
use super::{Hammer, Tally};
use crate::client::Conn;

/// (1) Max-size frames that do not decode: noise; a DescribeGroups whose id count claims
/// 2^40; a valid Heartbeat followed by a frame's worth of trailing bytes.
pub(super) async fn garbage(env: &Env, tally: &Tally) -> Result<()> {
    let max = env.max_frame;
    let mut templates: Vec<Frame> = Vec::new();
    let mut noisy = vec![0u8; 4];
    noisy.extend(noise(max, 0x9e37_79b9_7f4a_7c15));
    fix_prefix(&mut noisy)?;
    templates.push(Arc::new(noisy));
    let mut huge_len = frame(DescribeGroupsRequest {
        group_ids: Vec::new(),
    })?
    .to_vec();
    let at = huge_len.len().saturating_sub(8);
    if let Some(tail) = huge_len.get_mut(at..) {
        tail.copy_from_slice(&(1u64 << 40).to_le_bytes());
    }
    huge_len.resize(max + 4, 0);
    fix_prefix(&mut huge_len)?;
    templates.push(Arc::new(huge_len));
    let mut trailing = frame(muster_protocol::HeartbeatRequest {
        group_id: env.victim_group.clone(),
        generation_id: 1,
        member_id: "m".to_owned(),
        group_instance_id: None,
    })?
    .to_vec();
    trailing.resize(max + 4, 0xff);
    fix_prefix(&mut trailing)?;
    templates.push(Arc::new(trailing));
    let templates = Arc::new(templates);
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 4,
            client_id: fixed_client("atk-garbage"),
            recycle_after: 0,
            next: Arc::new(move |i| {
                let k = usize::try_from(i).unwrap_or(0) % templates.len();
                templates.get(k).cloned().context("no template")
            }),
        },
    )
    .await
}

/// (2) OffsetCommit (generation -1, to an Empty group) with a topic name of half a frame
/// and as many partitions as fill the other half.
pub(super) async fn big_commit(env: &Env, tally: &Tally) -> Result<()> {
    let topic_len = env.max_frame / 2;
    // partition i32 + offset i64 + metadata None (1 byte).
    let partitions = (env.max_frame - topic_len).saturating_sub(512) / 13;
    let group = format!("{}-atk-commit", env.run_id);
    let request = commit(
        &group,
        long_id("t", 0, topic_len),
        (0..i32::try_from(partitions)?)
            .map(|p| OffsetCommitPartition {
                partition: p,
                offset: 1,
                metadata: None,
            })
            .collect(),
    );
    let template = frame(request)?;
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 1,
            client_id: fixed_client("atk-commit"),
            recycle_after: 0,
            next: Arc::new(move |_| -> Result<Frame> { Ok(Arc::clone(&template)) }),
        },
    )
    .await
}

/// Commits `partitions` partitions of topic `atk` with `metadata_len` bytes of metadata each
/// to `group` (a few requests, each under the frame limit), so that fetches have big answers.
pub(super) async fn seed_offsets(
    env: &Env,
    tally: &Tally,
    group: &str,
    partitions: i32,
    metadata_len: usize,
) -> Result<()> {
    let Ok(conn) = Conn::connect(env.addr, "atk-seed").await else {
        tally.bump(|o| &mut o.connect_failures);
        return Ok(());
    };
    let per_request = i32::try_from((env.max_frame / 2 / (metadata_len + 32)).max(1))?;
    let metadata = "m".repeat(metadata_len);
    let mut start = 0;
    while start < partitions {
        let end = partitions.min(start + per_request);
        let request = commit(
            group,
            "atk".to_owned(),
            (start..end)
                .map(|p| OffsetCommitPartition {
                    partition: p,
                    offset: 1,
                    metadata: Some(metadata.clone()),
                })
                .collect(),
        );
        match conn.call_within(Duration::from_secs(10), request).await {
            Ok(answer) => tally.answer(&answer),
            Err(_) => {
                tally.bump(|o| &mut o.stalls);
                return Ok(());
            }
        }
        start = end;
    }
    Ok(())
}

/// (3) DescribeGroups naming a victim's group as many times as fit, and OffsetFetch naming one
/// partition (with 1 000 bytes of stored metadata) as many times as fit, alternately.
pub(super) async fn repeats(env: &Env, tally: &Tally) -> Result<()> {
    let group = format!("{}-atk-repeats", env.run_id);
    seed_offsets(env, tally, &group, 1, 1_000).await?;
    let ids = env.max_frame.saturating_sub(512) / (env.victim_group.len() + 8);
    let describe = frame(DescribeGroupsRequest {
        group_ids: vec![env.victim_group.clone(); ids],
    })?;
    let fetch = frame(OffsetFetchRequest {
        group_id: group,
        topics: Some(vec![TopicPartitions {
            topic: "atk".to_owned(),
            partitions: vec![0; env.max_frame.saturating_sub(512) / 4],
        }]),
    })?;
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 1,
            client_id: fixed_client("atk-repeats"),
            recycle_after: 0,
            next: Arc::new(move |i| -> Result<Frame> {
                Ok(Arc::clone(if i % 2 == 0 { &describe } else { &fetch }))
            }),
        },
    )
    .await
}

/// (5) JoinGroup with no member id, pipelined: to one group (pending member ids pile up) and
/// to a new group each time, alternately.
pub(super) async fn join_flood(env: &Env, tally: &Tally) -> Result<()> {
    let run_id = env.run_id.clone();
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 32,
            client_id: fixed_client("atk-flood"),
            recycle_after: 0,
            next: Arc::new(move |i| {
                let group = if i % 2 == 0 {
                    format!("{run_id}-atk-flood")
                } else {
                    format!("{run_id}-atk-new-{i}")
                };
                frame(join(group, String::new(), None))
            }),
        },
    )
    .await
}

/// (6) Frame-sized ids: the Hello client id (which the server puts into member ids), a new
/// group's id, an unknown member id, and a static member's instance id, each nearly a frame
/// and each new.
pub(super) async fn huge_ids(env: &Env, tally: &Tally) -> Result<()> {
    let len = env.max_frame.saturating_sub(1_024);
    let hello_len = env.max_frame.saturating_sub(256);
    let group = format!("{}-atk-ids", env.run_id);
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 4,
            client_id: Arc::new(move |i| long_id("c", i, hello_len)),
            // New connections keep new client ids coming.
            recycle_after: 16,
            next: Arc::new(move |i| {
                let request = match i % 3 {
                    0 => join(long_id("g", i, len), String::new(), None),
                    1 => join(group.clone(), long_id("m", i, len), None),
                    _ => join(group.clone(), String::new(), Some(long_id("i", i, len))),
                };
                frame(request)
            }),
        },
    )
    .await
}

/// (8) CreateTopics: one new topic with i32::MAX partitions, and as many new topics as fit
/// in a frame with i32::MAX partitions each, alternately.
pub(super) async fn big_topics(env: &Env, tally: &Tally) -> Result<()> {
    let max = env.max_frame;
    hammer(
        env,
        tally,
        Hammer {
            connections: env.connections,
            depth: 1,
            client_id: fixed_client("atk-topics"),
            recycle_after: 0,
            next: Arc::new(move |i| {
                let topics = if i % 2 == 0 {
                    vec![TopicInfo {
                        topic: format!("atk-big-{i}"),
                        partitions: i32::MAX,
                    }]
                } else {
                    // Name (8-byte length + ~16 bytes) + partitions (4 bytes).
                    (0..max.saturating_sub(512) / 32)
                        .map(|j| TopicInfo {
                            topic: format!("atk-{i}-{j}"),
                            partitions: i32::MAX,
                        })
                        .collect()
                };
                frame(CreateTopicsRequest { topics })
            }),
        },
    )
    .await
}
