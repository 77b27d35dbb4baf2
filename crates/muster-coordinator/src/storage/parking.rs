//! Startup with parking ([`Store::load_parking`]): a group that is nothing but data once
//! loaded — no record, or an Empty record with no member: an abandoned group's offsets, a
//! simple consumer's — is registered parked as an index entry, with its data left in the
//! store. What startup needs of such a group is a [`ParkedSummary`]: its record (for its
//! creator and when it went Empty) and what its deadlines depend on (its oldest offset's
//! commit, its oldest quarantined offset), not its offsets, history or journal themselves.
//!
//! [`summarise`] makes the summaries from a full load (the trait's default).
//!
//! [`Store::load_parking`]: super::Store::load_parking

use std::collections::{HashMap, HashSet};

use super::{GroupRecord, StoredState};
use crate::types::{GroupState, Millis};

/// What startup keeps of a group loaded parked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedSummary {
    pub group_id: String,
    /// Its record, if one was ever written: Empty, with no member.
    pub record: Option<GroupRecord>,
    /// When its oldest offset was committed (`None`: it has no offset).
    pub oldest_commit: Option<Millis>,
    /// Its partitions in the expiry quarantine.
    pub quarantined: u32,
    /// When the oldest of them went in (`None`: none).
    pub oldest_quarantined: Option<Millis>,
}

impl ParkedSummary {
    fn bare(group_id: String) -> Self {
        ParkedSummary {
            group_id,
            record: None,
            oldest_commit: None,
            quarantined: 0,
            oldest_quarantined: None,
        }
    }
}

/// A load for a server that parks: the groups that are not nothing but data, in full, and a
/// summary of each group that is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParkingLoad {
    /// Everything but the parked groups (and the topic catalog).
    pub state: StoredState,
    pub parked: Vec<ParkedSummary>,
}

/// Whether a group whose record is `record` (`None`: never written) is nothing but data once
/// loaded: restored, it is Empty with no member of either protocol.
pub fn is_data_only(record: Option<&GroupRecord>) -> bool {
    record.is_none_or(|r| {
        r.state == GroupState::Empty
            && r.members.is_empty()
            && r.consumer.as_ref().is_none_or(|c| c.members.is_empty())
    })
}

/// Splits a full load: each group that is nothing but data becomes a [`ParkedSummary`]
/// (its offsets, history, quarantine and journal dropped), every other group stays whole.
pub fn summarise(state: StoredState) -> ParkingLoad {
    let StoredState {
        groups,
        offsets,
        topics,
        journals,
        history,
        quarantine,
    } = state;
    let mut parked: Vec<ParkedSummary> = Vec::new();
    // Group id → its summary's place in `parked`.
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut whole = Vec::new();
    for record in groups {
        if is_data_only(Some(&record)) {
            at.insert(record.group_id.clone(), parked.len());
            let mut summary = ParkedSummary::bare(record.group_id.clone());
            summary.record = Some(record);
            parked.push(summary);
        } else {
            whole.push(record);
        }
    }
    let kept: HashSet<String> = whole.iter().map(|r| r.group_id.clone()).collect();
    let mut kept_offsets = Vec::new();
    for (group_id, writes) in offsets {
        if kept.contains(&group_id) {
            kept_offsets.push((group_id, writes));
            continue;
        }
        let oldest = writes.iter().map(|w| w.committed.commit_timestamp_ms).min();
        let summary = summary_of(&mut parked, &mut at, group_id);
        summary.oldest_commit = earliest(summary.oldest_commit, oldest);
    }
    let mut kept_history = Vec::new();
    for (group_id, entries) in history {
        if kept.contains(&group_id) {
            kept_history.push((group_id, entries));
        } else {
            // A group may have nothing but its history left: it still exists.
            summary_of(&mut parked, &mut at, group_id);
        }
    }
    let mut kept_quarantine = Vec::new();
    for (group_id, offsets) in quarantine {
        if kept.contains(&group_id) {
            kept_quarantine.push((group_id, offsets));
            continue;
        }
        let oldest = offsets.iter().map(|q| q.quarantined_at).min();
        let count = u32::try_from(offsets.len()).unwrap_or(u32::MAX);
        let summary = summary_of(&mut parked, &mut at, group_id);
        summary.quarantined = summary.quarantined.saturating_add(count);
        summary.oldest_quarantined = earliest(summary.oldest_quarantined, oldest);
    }
    // A journal belongs to a group with a record; a parked group's is read back with it.
    let journals = journals
        .into_iter()
        .filter(|(group_id, _)| kept.contains(group_id))
        .collect();
    ParkingLoad {
        state: StoredState {
            groups: whole,
            offsets: kept_offsets,
            topics,
            journals,
            history: kept_history,
            quarantine: kept_quarantine,
        },
        parked,
    }
}

/// The summary of `group_id` in `parked` (`at`: where each is), a bare one added if it has
/// none yet (a group with no record).
fn summary_of<'a>(
    parked: &'a mut Vec<ParkedSummary>,
    at: &mut HashMap<String, usize>,
    group_id: String,
) -> &'a mut ParkedSummary {
    let i = *at.entry(group_id).or_insert_with_key(|id| {
        parked.push(ParkedSummary::bare(id.clone()));
        parked.len() - 1
    });
    &mut parked[i]
}

/// The earlier of two times, either of which may be missing.
fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
