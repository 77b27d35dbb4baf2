//! `muster topics create | list`.
//!
//! CreateTopics creates a topic or raises its partition count; lowering it is refused
//! (`INVALID_PARTITIONS`). `create` reads the current count first, only to say what changed
//! (created, raised, unchanged) and, on a refusal, what the count is.

use muster_client::{ErrorCode, TopicInfo};
use serde::Serialize;

use super::Context;
use crate::exit::Failure;
use crate::render::{self, Report};

/// What `topics create` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TopicAction {
    Created,
    Raised,
    Unchanged,
}

/// `topics create`: `{"topic", "partitions", "previous_partitions", "action"}`.
#[derive(Debug, Serialize)]
pub struct TopicCreated {
    pub topic: String,
    pub partitions: i32,
    /// The count before; `null` when the topic did not exist.
    pub previous_partitions: Option<i32>,
    pub action: TopicAction,
}

impl Report for TopicCreated {
    fn human(&self) -> String {
        let (topic, n) = (&self.topic, self.partitions);
        match (self.action, self.previous_partitions) {
            (TopicAction::Raised, Some(before)) => {
                format!("raised the partitions of topic {topic:?} from {before} to {n}")
            }
            (TopicAction::Unchanged, _) => format!("topic {topic:?} already has {n} partitions"),
            _ => format!("created topic {topic:?} with {n} partitions"),
        }
    }
}

pub async fn create(ctx: &Context, topic: &str, partitions: i32) -> Result<TopicCreated, Failure> {
    let what = format!("cannot set the partitions of topic {topic:?} to {partitions}");
    let before = ctx
        .admin
        .describe_topic(topic)
        .await
        .map_err(|e| ctx.fail(&what, &e))?
        .map(|t| t.partitions);
    if let Err(err) = ctx.admin.create_topic(topic, partitions).await {
        let explanation = match (err.error_code(), before) {
            (Some(ErrorCode::InvalidPartitions), Some(current)) if partitions < current => Some(
                format!("the topic has {current} partitions; a partition count can only be raised"),
            ),
            (Some(ErrorCode::InvalidPartitions), _) if partitions < 1 => {
                Some("a topic needs at least 1 partition".to_owned())
            }
            _ => None,
        };
        return Err(match (err.code(), explanation) {
            (Some(code), Some(explanation)) => Failure::server(&what, code, Some(&explanation)),
            _ => ctx.fail(&what, &err),
        });
    }
    let action = match before {
        None => TopicAction::Created,
        Some(b) if b < partitions => TopicAction::Raised,
        Some(_) => TopicAction::Unchanged,
    };
    Ok(TopicCreated {
        topic: topic.to_owned(),
        partitions,
        previous_partitions: before,
        action,
    })
}

/// `topics list`: `{"topics": [{"topic", "partitions"}]}`, sorted by name.
#[derive(Debug, Serialize)]
pub struct TopicList {
    pub topics: Vec<TopicRow>,
}

#[derive(Debug, Serialize)]
pub struct TopicRow {
    pub topic: String,
    pub partitions: i32,
}

impl From<TopicInfo> for TopicRow {
    fn from(t: TopicInfo) -> Self {
        TopicRow {
            topic: t.topic,
            partitions: t.partitions,
        }
    }
}

impl Report for TopicList {
    fn human(&self) -> String {
        if self.topics.is_empty() {
            return String::new();
        }
        render::table(
            &["TOPIC", "PARTITIONS"],
            self.topics
                .iter()
                .map(|t| [t.topic.clone(), t.partitions.to_string()]),
        )
    }

    fn note(&self) -> Option<String> {
        self.topics.is_empty().then(|| "no topics".to_owned())
    }
}

pub async fn list(ctx: &Context) -> Result<TopicList, Failure> {
    let mut topics: Vec<TopicRow> = ctx
        .admin
        .describe_topics(None)
        .await
        .map_err(|e| ctx.fail("cannot list topics", &e))?
        .into_iter()
        .map(TopicRow::from)
        .collect();
    topics.sort_by(|a, b| a.topic.cmp(&b.topic));
    Ok(TopicList { topics })
}
