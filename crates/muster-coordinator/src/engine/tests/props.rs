//! The property test: random operation sequences, with the engine's invariants checked after
//! every step.

use super::*;

// ---------------------------------------------------------------------------- property test

/// One step a client (or the clock) takes.
#[derive(Debug, Clone)]
enum Op {
    /// A new dynamic client asks for a member id.
    NewMember,
    /// Known id `i` (pending or member) joins with its last request; `changed` flips its topics.
    Join {
        i: usize,
        changed: bool,
    },
    /// Static instance `k` joins with an empty member id (first join or takeover).
    StaticJoin {
        k: usize,
        short_session: bool,
    },
    /// Known id `i` syncs at the generation it last learned (the leader assigns).
    Sync {
        i: usize,
    },
    Heartbeat {
        i: usize,
    },
    Commit {
        i: usize,
    },
    Leave {
        i: usize,
    },
    Advance {
        ms: Millis,
    },
    /// Time moves to the group's next deadline.
    TickDeadline,
    /// A well-behaved client moves the rebalance on: a member the barrier waits for rejoins,
    /// or the leader (else a follower) syncs. Steers runs into CompletingRebalance and Stable.
    Cooperate {
        i: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::NewMember),
        4 => (0usize..8, any::<bool>()).prop_map(|(i, c)| Op::Join { i, changed: c && i % 3 == 0 }),
        1 => (0usize..2, any::<bool>()).prop_map(|(k, s)| Op::StaticJoin { k, short_session: s }),
        4 => (0usize..8).prop_map(|i| Op::Sync { i }),
        2 => (0usize..8).prop_map(|i| Op::Heartbeat { i }),
        1 => (0usize..8).prop_map(|i| Op::Commit { i }),
        1 => (0usize..8).prop_map(|i| Op::Leave { i }),
        2 => prop::sample::select(vec![1, 700, 3_000, 9_000, 25_000]).prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::TickDeadline),
        5 => (0usize..8).prop_map(|i| Op::Cooperate { i }),
    ]
}

/// What clients know, to make plausible requests and to check the engine against.
#[derive(Default)]
struct Model {
    /// Every id handed out, in order (ops pick one by index).
    ids: Vec<String>,
    /// The generation each id last learned from a JoinGroup answer.
    generation: HashMap<String, i32>,
    /// The assignment of the leader's last SyncGroup that took effect.
    assignment: HashMap<String, Vec<TopicPartitions>>,
}

impl Model {
    fn pick(&self, i: usize) -> Option<String> {
        (!self.ids.is_empty()).then(|| self.ids[i % self.ids.len()].clone())
    }

    fn learn(&mut self, replies: &[(u32, Response)]) {
        for (_, r) in replies {
            if let Response::JoinGroup(j) = r {
                let learned =
                    j.error_code == 0 || j.error_code == code(ErrorCode::MemberIdRequired);
                if learned && !self.ids.contains(&j.member_id) {
                    self.ids.push(j.member_id.clone());
                }
                if j.error_code == 0 {
                    self.generation.insert(j.member_id.clone(), j.generation_id);
                }
            }
        }
    }
}

/// The concrete step a cooperative client takes now (see [`Op::Cooperate`]).
fn cooperate(h: &Harness, model: &Model, i: usize) -> Op {
    let index_of = |id: &str| model.ids.iter().position(|x| x == id);
    let members = h.describe().members;
    let pick = |ids: Vec<&str>| -> Option<usize> {
        (!ids.is_empty())
            .then(|| ids[i % ids.len()])
            .and_then(index_of)
    };
    let chosen = match h.state() {
        GroupState::PreparingRebalance => pick(
            members
                .iter()
                .filter(|m| m.holding_rebalance && h.last_join.contains_key(&m.member_id))
                .map(|m| m.member_id.as_str())
                .collect(),
        )
        .map(|i| Op::Join { i, changed: false }),
        GroupState::CompletingRebalance | GroupState::Stable => {
            let leader = h.group.leader().unwrap_or_default();
            let leader_pending = members
                .iter()
                .any(|m| m.member_id == leader && m.holding_rebalance);
            if leader_pending {
                index_of(leader).map(|i| Op::Sync { i })
            } else {
                pick(members.iter().map(|m| m.member_id.as_str()).collect()).map(|i| Op::Sync { i })
            }
        }
        // Classic groups only (the consumer protocol's states never occur here).
        GroupState::Empty | GroupState::Dead | GroupState::Assigning | GroupState::Reconciling => {
            None
        }
    };
    chosen.unwrap_or(Op::Join { i, changed: false })
}

fn run_ops(delay: u32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut h = Harness::with_config(with_delay(delay));
    let mut model = Model::default();
    let mut last_generation = h.generation();
    for op in ops {
        let op = match op {
            Op::Cooperate { i } => cooperate(&h, &model, i),
            other => other,
        };
        let before = h.state();
        let mut ticked = false;
        match op.clone() {
            Op::NewMember => {
                h.join("", None, &["t1"], &["range", "roundrobin"]);
            }
            Op::Join { i, changed } => {
                if let Some(id) = model.pick(i) {
                    if h.last_join.contains_key(&id) {
                        h.rejoin_with(&id, |r| {
                            if changed {
                                r.topics = if r.topics.len() == 1 {
                                    strings(&["t1", "t2"])
                                } else {
                                    strings(&["t1"])
                                };
                            }
                        });
                    }
                }
            }
            Op::StaticJoin { k, short_session } => {
                let instance = format!("s{k}");
                let old = h.group.statics.get(&instance).map(|id| id.to_string());
                let t = h.send_join(JoinGroupRequest {
                    session_timeout_ms: if short_session { 5_000 } else { 40_000 },
                    rebalance_timeout_ms: if short_session { 30_000 } else { 20_000 },
                    ..Harness::join_req("", Some(&instance), &["t1"], &["range", "roundrobin"])
                });
                // A takeover answered at once in Stable keeps the old assignment.
                if let Some(Response::JoinGroup(r)) = h
                    .replies
                    .iter()
                    .find(|(tk, _)| *tk == t)
                    .map(|(_, r)| r.clone())
                {
                    if r.error_code == 0
                        && before == GroupState::Stable
                        && h.state() == GroupState::Stable
                    {
                        let old = old.expect("a takeover answered at once replaces a member");
                        if let Some(a) = model.assignment.remove(&old) {
                            model.assignment.insert(r.member_id.clone(), a);
                        }
                    }
                }
            }
            Op::Sync { i } => {
                if let Some(id) = model.pick(i) {
                    let generation = model.generation.get(&id).copied().unwrap_or(-1);
                    let is_leader = h.group.leader() == Some(id.as_str());
                    let assignments: Vec<MemberAssignment> = if is_leader {
                        h.describe()
                            .members
                            .iter()
                            .zip(0..)
                            .filter(|(_, n)| n % 3 != 2) // leave some members out
                            .map(|(m, n)| assign(&m.member_id, vec![tp("t1", &[n, generation])]))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    let applies = is_leader
                        && before == GroupState::CompletingRebalance
                        && generation == h.generation();
                    let t = h.sync(&id, generation, assignments.clone());
                    if applies {
                        let leader_answer = h
                            .replies
                            .iter()
                            .find(|(tk, _)| *tk == t)
                            .map(|(_, r)| r.clone());
                        prop_assert!(
                            matches!(&leader_answer, Some(Response::SyncGroup(s)) if s.error_code == 0),
                            "the leader's sync in CompletingRebalance is answered at once: {leader_answer:?}"
                        );
                        prop_assert_eq!(h.state(), GroupState::Stable);
                        model.assignment = assignments
                            .into_iter()
                            .map(|a| (a.member_id, a.partitions))
                            .collect();
                    }
                }
            }
            Op::Heartbeat { i } => {
                if let Some(id) = model.pick(i) {
                    let generation = model.generation.get(&id).copied().unwrap_or(-1);
                    h.heartbeat(&id, generation);
                }
            }
            Op::Commit { i } => {
                if let Some(id) = model.pick(i) {
                    let generation = model.generation.get(&id).copied().unwrap_or(-1);
                    let (r, w) = h.commit(
                        &id,
                        None,
                        generation,
                        vec![commit_topic("t1", &[(0, 1, None)])],
                    );
                    prop_assert!(r.error_code != 0 || w.len() == 1);
                    prop_assert!(r.error_code == 0 || w.is_empty());
                }
            }
            Op::Leave { i } => {
                if let Some(id) = model.pick(i) {
                    h.leave(&[(&id, None)]);
                }
            }
            Op::Advance { ms } => {
                h.advance(ms);
                ticked = true;
            }
            Op::TickDeadline => {
                if let Some(d) = h.group.next_deadline() {
                    h.tick_to(d.max(h.now));
                    ticked = true;
                }
            }
            Op::Cooperate { .. } => unreachable!("resolved above"),
        }
        let replies = h.take_replies();
        model.learn(&replies);
        for (_, r) in &replies {
            if let Response::JoinGroup(j) = r {
                if j.error_code == 0 {
                    prop_assert!(j.generation_id <= h.generation());
                }
            }
        }

        // Invariants.
        let persisted = h.take_persist();
        let g = &h.group;
        prop_assert!(
            g.generation() >= last_generation,
            "generation went down after {op:?}"
        );
        if g.generation() != last_generation
            || (g.state() == GroupState::Stable && before != GroupState::Stable)
        {
            prop_assert!(
                persisted,
                "a new generation or assignment was not persisted"
            );
        }
        last_generation = g.generation();
        if g.state() == GroupState::Empty {
            prop_assert_eq!(g.member_count(), 0);
        }
        if g.member_count() == 0 {
            prop_assert!(
                matches!(
                    g.state(),
                    GroupState::Empty | GroupState::PreparingRebalance | GroupState::Dead
                ),
                "no members in {:?}",
                g.state()
            );
            if g.state() == GroupState::PreparingRebalance {
                prop_assert!(
                    g.next_deadline().is_some(),
                    "a memberless barrier must close"
                );
            }
        }
        if matches!(
            g.state(),
            GroupState::Stable | GroupState::CompletingRebalance
        ) {
            let leader = g.leader().expect("a leader");
            prop_assert!(g.has_member(leader));
            let assignor = g.assignor().expect("an assignor");
            prop_assert!(g.members.values().all(|m| m.supports(assignor)));
        }
        if g.state() == GroupState::Stable {
            for m in h.describe().members {
                let expected = model
                    .assignment
                    .get(&m.member_id)
                    .cloned()
                    .unwrap_or_default();
                prop_assert_eq!(&m.assignment, &expected, "assignment of {}", m.member_id);
            }
        }
        let awaiting = g
            .members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count();
        prop_assert_eq!(g.num_awaiting_join, awaiting);
        // Phase state lives exactly as long as its phase.
        prop_assert_eq!(
            g.barrier.is_some(),
            g.state() == GroupState::PreparingRebalance,
            "barrier state outside PreparingRebalance"
        );
        if let Some(window) = &g.sync_window {
            prop_assert!(
                matches!(
                    g.state(),
                    GroupState::CompletingRebalance | GroupState::Stable
                ),
                "a sync window in {:?}",
                g.state()
            );
            for id in &window.pending {
                prop_assert!(g.has_member(id), "a non-member owes a SyncGroup");
            }
        }
        if g.state() != GroupState::PreparingRebalance {
            prop_assert_eq!(awaiting, 0, "held joins outside a barrier");
        }
        if g.state() != GroupState::CompletingRebalance {
            prop_assert!(g.members.values().all(|m| m.awaiting_sync.is_none()));
        }
        for s in g.statics.values() {
            prop_assert!(g.has_member(s), "static binding to a non-member");
        }
        // An actor arming its timer from the effects' deadlines never sleeps past a deadline.
        if let Some(next) = h.group.next_deadline() {
            prop_assert!(
                h.armed.is_some_and(|a| a <= next),
                "armed timer {:?} is later than the next deadline {next} after {op:?}",
                h.armed
            );
        }
        if ticked {
            let now = h.now;
            prop_assert!(
                h.group.next_deadline().is_none_or(|d| d > now),
                "after tick({now}) the next deadline is {:?}",
                h.group.next_deadline()
            );
        }
    }
    Ok(())
}

/// 128 cases by default so the suite stays fast; `PROPTEST_CASES=20000` for a deeper search.
fn prop_config() -> ProptestConfig {
    let default = ProptestConfig::default();
    ProptestConfig {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            default.cases
        } else {
            128
        },
        failure_persistence: None,
        ..default
    }
}

proptest! {
    #![proptest_config(prop_config())]

    #[test]
    fn engine_invariants_hold(delay in prop::sample::select(vec![0u32, 3_000]),
                              ops in prop::collection::vec(op(), 1..80)) {
        run_ops(delay, ops)?;
    }
}
