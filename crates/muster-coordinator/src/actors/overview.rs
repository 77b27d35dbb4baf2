//! The groups at a glance, one page at a time: what musterd's dashboard lists
//! (docs/operations.md, "Dashboard"). Not a wire request: the admin listener asks the
//! supervisor directly with [`ListOverview`].
//!
//! A node may hold 100 000 groups and a dashboard refreshes every few seconds, so a page is
//! picked in one pass over the registry that keeps at most `limit` ids (a bounded heap), never
//! a sorted copy of every id; the page's groups are then asked for their [`GroupSummary`]
//! (generation, leader, time in state) concurrently. Paging is by cursor (`after` / `before`
//! a group id, in id order), so page 1 000 costs what page 1 does. Only the groups the
//! principal may `describe` are seen, counted or summarised, as with ListGroups.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use actix::prelude::*;
use futures_util::future::join_all;

use super::admin_access::may_describe_group;
use super::group::summarize;
use super::messages::{GroupSummary, Summarize};
use super::supervisor::Supervisor;
use crate::access::Access;
use crate::engine::GroupState;

/// The most groups one page holds.
pub const MAX_OVERVIEW_PAGE: usize = 500;

/// Admin listener → supervisor: one page of the groups `access` may describe.
#[derive(Debug, Message)]
#[rtype(result = "OverviewPage")]
pub struct ListOverview {
    pub access: Access,
    pub query: OverviewQuery,
}

/// Which groups, and which page of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverviewQuery {
    /// Only ids containing this (ASCII case-insensitive); empty = all.
    pub filter: String,
    /// Only groups in this state.
    pub state: Option<GroupState>,
    /// The page: the first `limit` ids after this one, or, with `before`, the last `limit`
    /// ids before that one. Neither: the first page.
    pub after: Option<String>,
    pub before: Option<String>,
    /// Groups per page (1 ..= [`MAX_OVERVIEW_PAGE`]).
    pub limit: usize,
}

/// One page, and where it stands among the groups that match.
#[derive(Debug, Clone, Default)]
pub struct OverviewPage {
    /// Groups the principal may see on this node (whatever the filter).
    pub total: usize,
    /// Of those, how many are in each state (whatever the filter), in [`GroupState::ALL`] order.
    pub per_state: Vec<(GroupState, usize)>,
    /// Groups that match the filter and state.
    pub matching: usize,
    /// How many matching groups sort before this page's first one.
    pub offset: usize,
    /// Matching groups after this page's last one exist.
    pub more_after: bool,
    pub groups: Vec<GroupSummary>,
}

/// ASCII case-insensitive `needle in haystack`, without allocating (it runs once per group).
fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// A page picked from `ids` (any order, each once) by `query`'s cursor: the page's ids in
/// ascending order, how many of `ids` sort before the first, and whether any sort after the
/// last. One pass, at most `limit + 1` ids held.
pub(super) fn pick_page<'a>(
    ids: impl Iterator<Item = &'a str>,
    query: &OverviewQuery,
) -> (Vec<&'a str>, usize, bool) {
    let limit = query.limit.clamp(1, MAX_OVERVIEW_PAGE);
    match &query.before {
        Some(before) => {
            // The `limit` largest ids below `before`: a min-heap of them.
            let (mut below, mut at_or_above) = (0usize, 0usize);
            let mut heap: BinaryHeap<Reverse<&str>> = BinaryHeap::with_capacity(limit + 1);
            for id in ids {
                if id >= before.as_str() {
                    at_or_above += 1;
                    continue;
                }
                below += 1;
                heap.push(Reverse(id));
                if heap.len() > limit {
                    heap.pop();
                }
            }
            let mut page: Vec<&str> = heap.into_iter().map(|Reverse(id)| id).collect();
            page.sort_unstable();
            (page.clone(), below - page.len(), at_or_above > 0)
        }
        None => {
            // The `limit` smallest ids above `after`: a max-heap of them.
            let (mut skipped, mut above) = (0usize, 0usize);
            let mut heap: BinaryHeap<&str> = BinaryHeap::with_capacity(limit + 1);
            for id in ids {
                if query.after.as_deref().is_some_and(|after| id <= after) {
                    skipped += 1;
                    continue;
                }
                above += 1;
                heap.push(id);
                if heap.len() > limit {
                    heap.pop();
                }
            }
            let page = heap.into_sorted_vec();
            let more = above > page.len();
            (page, skipped, more)
        }
    }
}

impl Handler<ListOverview> for Supervisor {
    type Result = ResponseFuture<OverviewPage>;

    fn handle(&mut self, msg: ListOverview, _: &mut Self::Context) -> Self::Result {
        let ListOverview { access, query } = msg;
        let registry = &self.groups;
        let mut per_state = [0usize; GroupState::ALL.len()];
        let (mut total, mut matching) = (0usize, 0usize);
        // One pass: every visible group is counted, the matching ones go on to `pick_page`.
        let ids = registry
            .values()
            .filter(|e| e.state != GroupState::Dead)
            .filter(|e| may_describe_group(&access, &e.group_id))
            .filter_map(|e| {
                total += 1;
                if let Some(i) = GroupState::ALL.iter().position(|s| *s == e.state) {
                    per_state[i] += 1;
                }
                let wanted = query.state.is_none_or(|s| s == e.state)
                    && contains_ignore_case(&e.group_id, &query.filter);
                matching += usize::from(wanted);
                wanted.then_some(&*e.group_id)
            });
        let (page, offset, more_after) = pick_page(ids, &query);
        let now = self.now();
        let reader = self.reader();
        let asks: Vec<_> = page
            .into_iter()
            .filter_map(|id| registry.find(id))
            .map(|(_, e)| {
                let fallback = GroupSummary {
                    group_id: e.group_id.to_string(),
                    state: e.state,
                    members: e.members,
                    generation: -1,
                    assignor: None,
                    leader: None,
                    state_for_ms: 0,
                    quarantined: 0,
                    quarantine_drop_at_ms: None,
                };
                let asked = e.ask(&reader, Summarize, |g| summarize(g, now));
                async move { asked.await.unwrap_or(fallback) }
            })
            .collect();
        let per_state = GroupState::ALL
            .iter()
            .copied()
            .zip(per_state)
            .filter(|(s, _)| *s != GroupState::Dead)
            .collect();
        Box::pin(async move {
            OverviewPage {
                total,
                per_state,
                matching,
                offset,
                more_after,
                groups: join_all(asks).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(after: Option<&str>, before: Option<&str>, limit: usize) -> OverviewQuery {
        OverviewQuery {
            after: after.map(str::to_owned),
            before: before.map(str::to_owned),
            limit,
            ..OverviewQuery::default()
        }
    }

    const IDS: [&str; 7] = ["e", "a", "g", "c", "b", "f", "d"];

    #[test]
    fn pages_walk_forward_and_back_in_id_order() {
        let pick = |q: OverviewQuery| pick_page(IDS.iter().copied(), &q);
        assert_eq!(pick(query(None, None, 3)), (vec!["a", "b", "c"], 0, true));
        assert_eq!(
            pick(query(Some("c"), None, 3)),
            (vec!["d", "e", "f"], 3, true)
        );
        assert_eq!(pick(query(Some("f"), None, 3)), (vec!["g"], 6, false));
        assert_eq!(pick(query(Some("g"), None, 3)), (vec![], 7, false));
        assert_eq!(
            pick(query(None, Some("d"), 3)),
            (vec!["a", "b", "c"], 0, true)
        );
        assert_eq!(
            pick(query(None, Some("g"), 3)),
            (vec!["d", "e", "f"], 3, true)
        );
        assert_eq!(pick(query(None, Some("b"), 3)), (vec!["a"], 0, true));
        // A cursor that names no group still pages from where it would sort.
        assert_eq!(pick(query(Some("cc"), None, 2)), (vec!["d", "e"], 3, true));
    }

    #[test]
    fn a_page_is_at_least_one_and_at_most_the_ceiling() {
        let (page, _, more) = pick_page(IDS.iter().copied(), &query(None, None, 0));
        assert_eq!((page, more), (vec!["a"], true));
        let many: Vec<String> = (0..MAX_OVERVIEW_PAGE + 10)
            .map(|i| format!("{i:05}"))
            .collect();
        let (page, _, more) = pick_page(
            many.iter().map(String::as_str),
            &query(None, None, usize::MAX),
        );
        assert_eq!(page.len(), MAX_OVERVIEW_PAGE);
        assert!(more);
    }

    #[test]
    fn the_filter_ignores_ascii_case() {
        assert!(contains_ignore_case("Orders-EU", "orders"));
        assert!(contains_ignore_case("orders", ""));
        assert!(!contains_ignore_case("ord", "orders"));
        assert!(contains_ignore_case("billing-PAYMENTS-1", "payments"));
    }
}
