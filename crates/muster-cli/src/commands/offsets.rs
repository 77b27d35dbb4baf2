//! `muster offsets get | set`.
//!
//! OffsetFetch answers an unknown group like a group with no commits, so `get` asks
//! DescribeGroups when nothing is committed: `Dead` there means not found.
//!
//! `set` commits as an administrator (generation -1, no member id), which the server accepts
//! only while the group is Empty (or absent: it is then created, Empty). The server is the
//! judge: there is no check beforehand that could go stale; when it refuses, the group is
//! described to say why (its state and member count).

use muster_client::{ErrorCode, OffsetAndMetadata, TopicPartition};
use serde::Serialize;

use super::{groups, Context};
use crate::exit::Failure;
use crate::render::{self, Report};

/// One committed offset.
#[derive(Debug, Clone, Serialize)]
pub struct OffsetEntry {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// `null` when none was stored.
    pub metadata: Option<String>,
}

/// `offsets get` and `offsets set`: `{"group", "offsets": [{"topic", "partition", "offset",
/// "metadata"}]}`, sorted by topic then partition.
#[derive(Debug, Serialize)]
pub struct GroupOffsets {
    pub group: String,
    pub offsets: Vec<OffsetEntry>,
}

impl Report for GroupOffsets {
    fn human(&self) -> String {
        if self.offsets.is_empty() {
            return String::new();
        }
        render::table(
            &["TOPIC", "PARTITION", "OFFSET", "METADATA"],
            self.offsets.iter().map(|o| {
                [
                    o.topic.clone(),
                    o.partition.to_string(),
                    o.offset.to_string(),
                    render::or_dash(o.metadata.as_deref()),
                ]
            }),
        )
    }

    fn note(&self) -> Option<String> {
        self.offsets
            .is_empty()
            .then(|| format!("group {:?} has no committed offsets", self.group))
    }
}

pub async fn get(ctx: &Context, group: &str) -> Result<GroupOffsets, Failure> {
    let what = format!("cannot get the offsets of group {group:?}");
    let fetched = ctx
        .admin
        .fetch_offsets(group, None)
        .await
        .map_err(|e| ctx.fail(&what, &e))?;
    if fetched.is_empty() {
        let described = ctx
            .admin
            .describe_group(group)
            .await
            .map_err(|e| ctx.fail(&what, &e))?;
        if groups::is_absent(&described) {
            return Err(Failure::not_found(format!("group {group:?} not found")));
        }
    }
    let offsets = fetched
        .into_iter()
        .map(|(tp, o)| OffsetEntry {
            topic: tp.topic,
            partition: tp.partition,
            offset: o.offset,
            metadata: o.metadata,
        })
        .collect();
    Ok(GroupOffsets {
        group: group.to_owned(),
        offsets,
    })
}

/// The result of `offsets set`: the offsets now stored (the same shape as `offsets get`).
#[derive(Debug, Serialize)]
pub struct OffsetsSet(pub GroupOffsets);

impl Report for OffsetsSet {
    fn human(&self) -> String {
        self.0
            .offsets
            .iter()
            .map(|o| {
                format!(
                    "set the offset of {}:{} in group {:?} to {}",
                    o.topic, o.partition, self.0.group, o.offset
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

pub async fn set(ctx: &Context, group: &str, entry: OffsetEntry) -> Result<OffsetsSet, Failure> {
    let what = format!("cannot set the offsets of group {group:?}");
    let tp = TopicPartition::new(entry.topic.clone(), entry.partition);
    let offset = OffsetAndMetadata {
        offset: entry.offset,
        metadata: entry.metadata.clone(),
    };
    match ctx.admin.set_offsets(group, [(tp, offset)]).await {
        Ok(()) => Ok(OffsetsSet(GroupOffsets {
            group: group.to_owned(),
            offsets: vec![entry],
        })),
        Err(err) => {
            let Some(code) = err.code() else {
                return Err(ctx.fail(&what, &err));
            };
            let not_empty = matches!(
                ErrorCode::from_code(code),
                Some(
                    ErrorCode::UnknownMemberId
                        | ErrorCode::RebalanceInProgress
                        | ErrorCode::IllegalGeneration
                )
            );
            if !not_empty {
                return Err(ctx.fail(&what, &err));
            }
            let explanation = why_not_empty(ctx, group).await;
            Err(Failure::server(&what, code, Some(&explanation)))
        }
    }
}

/// Why the server refused an administrator's commit: the group has members. Says which state
/// and how many members, if the group can still be described.
async fn why_not_empty(ctx: &Context, group: &str) -> String {
    const RULE: &str = "offsets can only be set while the group has no members (state Empty); \
                        stop its consumers first";
    match ctx.admin.describe_group(group).await {
        Ok(described) if !groups::is_absent(&described) => {
            let n = described.members.len();
            format!(
                "the group is not Empty (state {}, {n} member{}): {RULE}",
                described.state,
                if n == 1 { "" } else { "s" }
            )
        }
        _ => format!("the group is not Empty: {RULE}"),
    }
}
