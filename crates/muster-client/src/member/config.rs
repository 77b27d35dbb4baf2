//! The member's configuration: [`MemberConfig`], the builder an application fills in (and
//! starts, in the parent module, which spawns the tasks of the chosen [`GroupProtocol`]), its
//! defaults (Kafka's) and the checks made before anything is started. It depends on none of
//! the member's tasks, which all read it.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::assignor::{self, Assignor, RebalanceProtocol};
use crate::backoff::Backoff;
use crate::error::ClientError;

/// The group protocol a member speaks (Kafka's `group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GroupProtocol {
    /// JoinGroup / SyncGroup / Heartbeat; the group's leader runs a client-side assignor.
    #[default]
    Classic,
    /// ConsumerGroupHeartbeat (protocol-v1 §7, Kafka 4's KIP-848): the server assigns, and
    /// members reconcile one by one without a group-wide barrier.
    Consumer,
}

impl GroupProtocol {
    pub fn name(self) -> &'static str {
        match self {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        }
    }
}

impl fmt::Display for GroupProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `classic` or `consumer` (any case), as Kafka's `group.protocol` is written.
impl FromStr for GroupProtocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("classic") {
            Ok(GroupProtocol::Classic)
        } else if s.eq_ignore_ascii_case("consumer") {
            Ok(GroupProtocol::Consumer)
        } else {
            Err(format!(
                "no group protocol named {s:?} (classic or consumer)"
            ))
        }
    }
}

/// Configuration of a group member. Build it with [`MemberConfig::new`] and the chained
/// setters, then [`MemberConfig::start`] it.
#[derive(Clone)]
pub struct MemberConfig {
    pub(crate) group_id: String,
    pub(crate) topics: Vec<String>,
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) heartbeat_interval: Option<Duration>,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) assignors: Vec<Arc<dyn Assignor>>,
    pub(crate) leave_group_on_close: Option<bool>,
    pub(crate) retry_backoff: Backoff,
    pub(crate) group_protocol: GroupProtocol,
    pub(crate) server_assignor: Option<String>,
}

impl fmt::Debug for MemberConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemberConfig")
            .field("group_protocol", &self.group_protocol)
            .field("group_id", &self.group_id)
            .field("topics", &self.topics)
            .field("session_timeout", &self.session_timeout)
            .field("rebalance_timeout", &self.rebalance_timeout)
            .field("heartbeat_interval", &self.effective_heartbeat_interval())
            .field("group_instance_id", &self.group_instance_id)
            .field("assignors", &self.assignor_list())
            .field("leave_group_on_close", &self.leaves_on_close())
            .field("server_assignor", &self.server_assignor)
            .finish()
    }
}

impl MemberConfig {
    /// A member of `group_id` subscribing to `topics`, with Kafka's defaults: the classic
    /// group protocol, session timeout 10 s, rebalance timeout 60 s, heartbeat every
    /// session / 3, assignors `range` then `cooperative-sticky` (so the eager protocol, as in
    /// Kafka 3.x).
    pub fn new<S: Into<String>>(
        group_id: impl Into<String>,
        topics: impl IntoIterator<Item = S>,
    ) -> Self {
        MemberConfig {
            group_id: group_id.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(60),
            heartbeat_interval: None,
            group_instance_id: None,
            assignors: vec![
                Arc::new(assignor::RangeAssignor),
                Arc::new(assignor::CooperativeStickyAssignor),
            ],
            leave_group_on_close: None,
            group_protocol: GroupProtocol::Classic,
            server_assignor: None,
            retry_backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_secs(2),
                multiplier: 2,
                jitter: 0.2,
            },
        }
    }

    /// The group protocol to speak. Default: [`GroupProtocol::Classic`].
    ///
    /// With [`GroupProtocol::Consumer`] the server assigns (see
    /// [`MemberConfig::server_assignor`]); the client-side assignors are not used, nor is the
    /// session timeout (the server's setting applies); the heartbeat interval is the server's
    /// once it has answered.
    pub fn group_protocol(mut self, protocol: GroupProtocol) -> Self {
        self.group_protocol = protocol;
        self
    }

    /// Consumer protocol: the server assignor to ask for, `uniform` (balanced and sticky) or
    /// `range` (co-partitioned). Default: none, the server's default (`uniform`). A name the
    /// server does not have stops the member with `UNSUPPORTED_ASSIGNOR`. Ignored by classic
    /// members, which use [`MemberConfig::assignors`].
    pub fn server_assignor(mut self, name: impl Into<String>) -> Self {
        self.server_assignor = Some(name.into());
        self
    }

    /// Classic protocol: how long the server waits without a heartbeat before removing the
    /// member. (A consumer-protocol member's session timeout is the server's setting.)
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    pub fn rebalance_timeout(mut self, timeout: Duration) -> Self {
        self.rebalance_timeout = timeout;
        self
    }

    /// Default: a third of the session timeout.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = Some(interval);
        self
    }

    /// Makes the member static (KIP-345): a restart within the session timeout gets its
    /// partitions back without a rebalance.
    pub fn group_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.group_instance_id = Some(instance_id.into());
        self
    }

    /// The assignors this member supports, by preference (replaces the default list).
    pub fn assignors(mut self, assignors: Vec<Arc<dyn Assignor>>) -> Self {
        self.assignors = assignors;
        self
    }

    /// The built-in assignors with these names, by preference (replaces the default list).
    pub fn assignor_names<S: AsRef<str>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self, ClientError> {
        self.assignors = names
            .into_iter()
            .map(|n| {
                assignor::builtin(n.as_ref()).ok_or_else(|| {
                    ClientError::Config(format!("no assignor named {:?}", n.as_ref()))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Whether `close()` sends LeaveGroup. Default: yes for dynamic members, no for static
    /// ones (as in Kafka, so that a restart causes no rebalance).
    ///
    /// Consumer protocol: leaving is a heartbeat with epoch -1; a static member that does not
    /// leave sends epoch -2 instead (a temporary leave: the server keeps its assignment until
    /// its session expires), and a dynamic one sends nothing.
    pub fn leave_group_on_close(mut self, leave: bool) -> Self {
        self.leave_group_on_close = Some(leave);
        self
    }

    /// Delays between retries of a failed JoinGroup / SyncGroup, and between consecutive
    /// lookups of the coordinator (those capped at 250 ms: a failover ends at an instant the
    /// client cannot know, and any wait past it adds to the member's failover time).
    pub fn retry_backoff(mut self, backoff: Backoff) -> Self {
        self.retry_backoff = backoff;
        self
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn topics(&self) -> &[String] {
        &self.topics
    }

    pub fn protocol(&self) -> GroupProtocol {
        self.group_protocol
    }

    /// The heartbeat interval in force (the configured one, or session timeout / 3).
    pub fn effective_heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval.unwrap_or(self.session_timeout / 3)
    }

    /// Whether `close()` sends LeaveGroup (the configured choice, or "if dynamic").
    pub fn leaves_on_close(&self) -> bool {
        self.leave_group_on_close
            .unwrap_or(self.group_instance_id.is_none())
    }

    /// The names of the configured assignors, by preference.
    pub fn assignor_list(&self) -> Vec<String> {
        self.assignors.iter().map(|a| a.name().to_owned()).collect()
    }

    /// Cooperative only if every assignor is (Kafka's rule).
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        if !self.assignors.is_empty()
            && self
                .assignors
                .iter()
                .all(|a| a.protocol() == RebalanceProtocol::Cooperative)
        {
            RebalanceProtocol::Cooperative
        } else {
            RebalanceProtocol::Eager
        }
    }

    pub(super) fn validate(&self) -> Result<(), ClientError> {
        let bad = |msg: String| Err(ClientError::Config(msg));
        if self.group_id.is_empty() {
            return bad("the group id is empty".into());
        }
        if self.group_protocol == GroupProtocol::Consumer {
            return self.validate_consumer();
        }
        if self.assignors.is_empty() {
            return bad("no assignor configured".into());
        }
        let mut names = self.assignor_list();
        names.sort();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return bad(format!("assignor names repeat: {names:?}"));
        }
        for (what, value) in [
            ("session timeout", self.session_timeout),
            ("rebalance timeout", self.rebalance_timeout),
        ] {
            if value.is_zero() || u32::try_from(value.as_millis()).is_err() {
                return bad(format!("{what} {value:?} is not 1 ms ..= u32::MAX ms"));
            }
        }
        let hb = self.effective_heartbeat_interval();
        if hb.is_zero() || hb >= self.session_timeout {
            return bad(format!(
                "heartbeat interval {hb:?} must be positive and below the session timeout {:?}",
                self.session_timeout
            ));
        }
        Ok(())
    }

    /// What a consumer-protocol member needs (its assignors and session timeout are unused).
    fn validate_consumer(&self) -> Result<(), ClientError> {
        let bad = |msg: String| Err(ClientError::Config(msg));
        if self.server_assignor.as_deref() == Some("") {
            return bad("the server assignor's name is empty".into());
        }
        let rebalance = self.rebalance_timeout;
        if rebalance.is_zero() || i32::try_from(rebalance.as_millis()).is_err() {
            return bad(format!(
                "rebalance timeout {rebalance:?} is not 1 ms ..= i32::MAX ms"
            ));
        }
        if self.effective_heartbeat_interval().is_zero() {
            return bad("the heartbeat interval is zero".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_protocol_defaults_to_classic_and_parses_kafkas_names() {
        let config = MemberConfig::new("g", ["t"]);
        assert_eq!(config.protocol(), GroupProtocol::Classic);
        assert_eq!(config.server_assignor, None);
        for protocol in [GroupProtocol::Classic, GroupProtocol::Consumer] {
            assert_eq!(protocol.to_string().parse(), Ok(protocol));
        }
        assert_eq!("CONSUMER".parse(), Ok(GroupProtocol::Consumer));
        assert!("eager".parse::<GroupProtocol>().is_err());
    }

    #[test]
    fn a_consumer_member_needs_no_client_assignor_but_an_i32_rebalance_timeout() {
        let consumer = MemberConfig::new("g", ["t"])
            .group_protocol(GroupProtocol::Consumer)
            .assignors(Vec::new());
        assert!(consumer.validate().is_ok());
        assert!(consumer
            .clone()
            .group_protocol(GroupProtocol::Classic)
            .validate()
            .is_err());
        let too_long = consumer
            .clone()
            .rebalance_timeout(Duration::from_millis(u64::from(u32::MAX)));
        assert!(too_long.validate().is_err());
        assert!(consumer.server_assignor("").validate().is_err());
    }
}
