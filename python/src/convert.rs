//! Admin answers as plain Python values: each protocol struct becomes a `dict` of its fields
//! (named as in the protocol and the CLI's JSON), lists become lists, `Option` becomes the
//! value or `None`. `muster/_native.pyi` describes the shapes as `TypedDict`s.

use muster_client::admin::{GroupListing, NodeGroup};
use muster_client::{Cluster, Node, NodeShards, OffsetAndMetadata, TopicPartition};
use muster_protocol::ConsumerMember;
use muster_protocol::{
    DescribedConsumerGroup, DescribedGroup, DescribedMember, FetchedPartition, FetchedTopic,
    GroupDiagnosisResponse, GroupSimulateResponse, ListedGroup, MemberChange, MemberWait,
    OffsetHistoryEntry, OffsetHistoryResponse, OffsetResetResponse, OffsetRestoreResponse,
    PartitionHistory, RebalanceCause, RebalanceRecord, RebalanceWait, ResetPartition, ResetTopic,
    SimulatedMember, TopicHistory, TopicInfo, TopicPartitions, WaitingMember,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::BTreeMap;

use crate::types::{PyOffsetAndMetadata, PyTopicPartition};

/// A value that becomes a Python object.
pub trait ToPy {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

macro_rules! scalar {
    ($($t:ty),*) => {$(
        impl ToPy for $t {
            fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(self.clone().into_pyobject(py)?.to_owned().into_any())
            }
        }
    )*};
}
scalar!(String, bool, i16, i32, i64, u16, u32, u64);

impl ToPy for () {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(py.None().into_bound(py))
    }
}

impl<T: ToPy> ToPy for Option<T> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(v) => v.to_py(py),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

impl<T: ToPy> ToPy for Box<T> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        (**self).to_py(py)
    }
}

impl<T: ToPy> ToPy for Vec<T> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = PyList::empty(py);
        for item in self {
            list.append(item.to_py(py)?)?;
        }
        Ok(list.into_any())
    }
}

impl ToPy for BTreeMap<TopicPartition, OffsetAndMetadata> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let dict = PyDict::new(py);
        for (tp, o) in self {
            dict.set_item(PyTopicPartition::from(tp), PyOffsetAndMetadata::from(o))?;
        }
        Ok(dict.into_any())
    }
}

/// `impl ToPy for T` as a dict of the listed fields.
macro_rules! dict {
    ($($t:ty { $($field:ident),* $(,)? })*) => {$(
        impl ToPy for $t {
            fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                let dict = PyDict::new(py);
                $(dict.set_item(stringify!($field), self.$field.to_py(py)?)?;)*
                Ok(dict.into_any())
            }
        }
    )*};
}

dict! {
    TopicInfo { topic, partitions }
    TopicPartitions { topic, partitions }
    ListedGroup { group_id, state, members }
    Node { node_id, host, port }
    NodeShards { node, shards }
    Cluster { name, shards, nodes }
    NodeGroup { node, group }
    DescribedGroup { group_id, state, generation_id, assignor, leader_id, members }
    DescribedMember {
        member_id, group_instance_id, client_id, client_host, topics, assignment,
        session_timeout_ms, last_seen_ms_ago, holding_rebalance,
    }
    DescribedConsumerGroup { group_id, state, group_epoch, assignment_epoch, assignor, members }
    ConsumerMember {
        member_id, group_instance_id, rack_id, member_epoch, client_id, client_host,
        subscribed_topics, subscribed_topic_regex, assignment, target_assignment,
    }
    RebalanceRecord {
        generation_id, trigger, started_at_ms, barrier_ms, sync_ms, assignor, leader_id,
        members, waited_for, evicted, joined, left, moved, changes, omitted,
    }
    RebalanceCause { kind, member_id, client_id, client_host, detail }
    MemberWait { member_id, rejoin_ms }
    MemberChange { member_id, gained, revoked }
    GroupDiagnosisResponse {
        state, generation_id, now_ms, rebalance, unowned, unowned_since_ms, storm,
        rebalances_in_window, storm_threshold, storm_window_ms,
    }
    RebalanceWait {
        phase, trigger, started_at_ms, phase_since_ms, deadline_ms, stuck, waiting_for,
        omitted, pending_joins,
    }
    WaitingMember { member_id, group_instance_id, client_id, client_host, last_heard_ms, leader }
    GroupSimulateResponse { assignor, members, stopped_partitions }
    SimulatedMember { member_id, change, kept, lost, gained }
    OffsetHistoryResponse { topics, omitted }
    TopicHistory { topic, partitions }
    PartitionHistory { partition, error_code, entries }
    OffsetHistoryEntry {
        seq, kind, offset, metadata, committed_at_ms, member_id, client_id, client_host,
        generation_id,
    }
    OffsetResetResponse { executed, recorded_at_ms, topics }
    ResetTopic { topic, partitions }
    ResetPartition { partition, current, new, error_code }
    OffsetRestoreResponse { executed, quarantined_at_ms, drop_at_ms, topics }
    FetchedTopic { topic, partitions }
    FetchedPartition { partition, offset, metadata, error_code }
}

impl ToPy for GroupListing {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let dict = PyDict::new(py);
        dict.set_item("nodes", self.nodes.to_py(py)?)?;
        dict.set_item("groups", self.groups.to_py(py)?)?;
        let failed = PyList::empty(py);
        for failure in &self.failed {
            let entry = PyDict::new(py);
            entry.set_item("node", failure.node.to_py(py)?)?;
            entry.set_item("error", failure.error.to_string())?;
            failed.append(entry)?;
        }
        dict.set_item("failed", failed)?;
        Ok(dict.into_any())
    }
}
