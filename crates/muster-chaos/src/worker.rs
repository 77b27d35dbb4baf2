//! One worker process: a member of a group (classic or consumer protocol) that owns
//! partitions of the run's topic, commits a rising offset for each (the last acknowledged
//! plus 1–3, every commit interval) and writes down, as it happens, everything the checker
//! needs ([`crate::history`]): each generation or member epoch it sees, each assignment with
//! its ownership epochs, each revocation and loss, each commit with its outcome.
//!
//! It commits a partition only once it knows the partition's ownership epoch and the offset
//! the group had committed when it got it (fetched after the assignment), so every commit
//! it sends is above every offset acknowledged before it was assigned the partition.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use muster_client::{
    Client, ClientConfig, ClientError, ConnectionConfig, Event as MemberEvent, GroupMember,
    GroupProtocol, MemberConfig, TopicPartition,
};

use crate::clock::now_ns;
use crate::history::{CommitEntry, Event, HistoryWriter, Outcome};
use crate::rng::Rng;

/// What a worker is told by the runner.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub group: String,
    pub name: String,
    pub incarnation: u32,
    pub protocol: GroupProtocol,
    pub bootstrap: Vec<String>,
    pub topic: String,
    pub history: PathBuf,
    pub session: Duration,
    pub commit_interval: Duration,
    pub seed: u64,
}

/// A partition the worker owns.
#[derive(Debug, Clone, Copy)]
struct Owned {
    /// `None` until known (asked after the assignment; asked again while unknown).
    epoch: Option<i32>,
    /// The next offset to commit from; `None` until the committed one was fetched.
    offset: Option<i64>,
}

/// Runs the worker until its member fails (a fatal error) or its events end.
pub async fn run(args: WorkerArgs) -> Result<()> {
    let mut log = HistoryWriter::create(&args.history)?;
    log.write(&Event::Start {
        t: now_ns(),
        group: args.group.clone(),
        worker: args.name.clone(),
        incarnation: args.incarnation,
        pid: std::process::id(),
        protocol: args.protocol.name().to_owned(),
    })?;
    let mut rng = Rng::new(args.seed ^ u64::from(args.incarnation).rotate_left(32));
    let client = connect(&args).await;
    let mut config = MemberConfig::new(&args.group, [args.topic.clone()])
        .group_protocol(args.protocol)
        .session_timeout(args.session)
        .rebalance_timeout(Duration::from_secs(10));
    if args.protocol == GroupProtocol::Classic {
        config = config.assignor_names(["cooperative-sticky"])?;
    }
    let (member, mut events) = config.start(client)?;
    let mut state = member.watch_state();
    let mut seen = (String::new(), -1);
    let mut owned: BTreeMap<i32, Owned> = BTreeMap::new();
    let mut tick = tokio::time::interval(args.commit_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let tp = |p: i32| TopicPartition::new(args.topic.clone(), p);

    loop {
        tokio::select! {
            changed = state.changed() => {
                if changed.is_err() {
                    break;
                }
                let s = state.borrow_and_update().clone();
                if (s.member_id.clone(), s.generation_id) != seen {
                    seen = (s.member_id.clone(), s.generation_id);
                    log.write(&Event::Member {
                        t: now_ns(),
                        member_id: s.member_id,
                        generation: s.generation_id,
                    })?;
                }
            }
            event = events.recv() => match event {
                Some(MemberEvent::Assigned(added)) => {
                    let t = now_ns();
                    let mut known = Vec::new();
                    for tp in added.iter() {
                        let epoch = added.ownership_epoch(tp);
                        owned.insert(tp.partition, Owned { epoch, offset: None });
                        if let Some(e) = epoch {
                            known.push((tp.partition, e));
                        }
                    }
                    // Partitions whose epoch is not known yet are written down once it is
                    // (below), stamped with this same receipt time.
                    log.write(&Event::Assigned {
                        t,
                        member_id: member.member_id(),
                        generation: added.generation(),
                        partitions: known,
                    })?;
                    let pending: Vec<i32> = added
                        .iter()
                        .filter(|tp| added.ownership_epoch(tp).is_none())
                        .map(|tp| tp.partition)
                        .collect();
                    drop(added);
                    if !pending.is_empty() {
                        pending_epochs(&member, &mut owned, &mut log, t, &pending).await?;
                    }
                    fetch_starts(&member, &mut owned, &args.topic).await;
                }
                Some(MemberEvent::Revoked(revoked)) => {
                    let parts: Vec<i32> = revoked.iter().map(|tp| tp.partition).collect();
                    let done: Vec<(i32, Owned)> = parts
                        .iter()
                        .filter_map(|p| owned.remove(p).map(|o| (*p, o)))
                        .collect();
                    commit(&member, &mut log, &tp, done.into_iter(), &mut owned).await?;
                    log.write(&Event::Revoked {
                        t: now_ns(),
                        member_id: member.member_id(),
                        generation: revoked.generation(),
                        partitions: parts,
                    })?;
                    drop(revoked);
                }
                Some(MemberEvent::Lost(lost)) => {
                    let parts: Vec<i32> = lost
                        .iter()
                        .filter(|tp| owned.remove(&tp.partition).is_some())
                        .map(|tp| tp.partition)
                        .collect();
                    if !parts.is_empty() {
                        log.write(&Event::Lost {
                            t: now_ns(),
                            member_id: member.member_id(),
                            generation: lost.generation(),
                            partitions: parts,
                        })?;
                    }
                }
                Some(MemberEvent::Error(fatal)) => {
                    log.write(&Event::Exit { t: now_ns(), reason: fatal.to_string() })?;
                    return Err(fatal.into());
                }
                Some(_) => {}
                None => break,
            },
            _ = tick.tick() => {
                let unknown: Vec<i32> = owned
                    .iter()
                    .filter(|(_, o)| o.epoch.is_none())
                    .map(|(p, _)| *p)
                    .collect();
                if !unknown.is_empty() {
                    // Their Assigned line is written now: the tenure started no later.
                    pending_epochs(&member, &mut owned, &mut log, now_ns(), &unknown).await?;
                }
                fetch_starts(&member, &mut owned, &args.topic).await;
                let due: Vec<(i32, Owned)> = owned
                    .iter_mut()
                    .filter(|(_, o)| o.epoch.is_some())
                    .filter_map(|(p, o)| {
                        let next = o.offset? + rng.range(1, 3) as i64;
                        o.offset = Some(next);
                        Some((*p, *o))
                    })
                    .collect();
                commit(&member, &mut log, &tp, due.into_iter(), &mut owned).await?;
            }
        }
    }
    log.write(&Event::Exit {
        t: now_ns(),
        reason: "the member's events ended".into(),
    })?;
    Ok(())
}

/// A client of the cluster, retrying until a bootstrap node answers (one may be cut).
async fn connect(args: &WorkerArgs) -> Client {
    let first = args.bootstrap.first().cloned().unwrap_or_default();
    loop {
        let config = ClientConfig {
            bootstrap: args.bootstrap.clone(),
            connection: ConnectionConfig::new(first.clone())
                .client_id(format!("{}#{}", args.name, args.incarnation))
                .request_timeout(Duration::from_secs(5)),
        };
        match Client::connect(config).await {
            Ok(client) => return client,
            Err(e) => {
                eprintln!("connect: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Asks the epochs of `pending` partitions; those learnt are written down as assigned at `t`.
async fn pending_epochs(
    member: &GroupMember,
    owned: &mut BTreeMap<i32, Owned>,
    log: &mut HistoryWriter,
    t: u64,
    pending: &[i32],
) -> Result<()> {
    let Ok(epochs) = member.fetch_ownership_epochs().await else {
        return Ok(());
    };
    let mut learnt = Vec::new();
    for p in pending {
        let epoch = epochs
            .iter()
            .find(|(tp, _)| tp.partition == *p)
            .map(|(_, e)| *e);
        if let (Some(o), Some(e)) = (owned.get_mut(p), epoch) {
            if o.epoch.is_none() {
                o.epoch = Some(e);
                learnt.push((*p, e));
            }
        }
    }
    if !learnt.is_empty() {
        log.write(&Event::Assigned {
            t,
            member_id: member.member_id(),
            generation: member.generation(),
            partitions: learnt,
        })?;
    }
    Ok(())
}

/// Fetches the committed offset of owned partitions that have none yet (a partition never
/// committed starts at 0).
async fn fetch_starts(member: &GroupMember, owned: &mut BTreeMap<i32, Owned>, topic: &str) {
    let missing: Vec<TopicPartition> = owned
        .iter()
        .filter(|(_, o)| o.offset.is_none())
        .map(|(p, _)| TopicPartition::new(topic, *p))
        .collect();
    if missing.is_empty() {
        return;
    }
    if let Ok(committed) = member.fetch_offsets(Some(&missing)).await {
        for tp in &missing {
            if let Some(o) = owned.get_mut(&tp.partition) {
                o.offset = Some(committed.get(tp).map_or(0, |c| c.offset));
            }
        }
    }
}

/// Commits `offsets` in one request and writes down how it went; partitions refused
/// PARTITION_NOT_OWNED are dropped from `owned`.
async fn commit(
    member: &GroupMember,
    log: &mut HistoryWriter,
    tp: &dyn Fn(i32) -> TopicPartition,
    offsets: impl Iterator<Item = (i32, Owned)>,
    owned: &mut BTreeMap<i32, Owned>,
) -> Result<()> {
    let entries: Vec<CommitEntry> = offsets
        .filter_map(|(partition, o)| {
            Some(CommitEntry {
                partition,
                offset: o.offset?,
                epoch: o.epoch?,
            })
        })
        .collect();
    if entries.is_empty() {
        return Ok(());
    }
    // Read with no await before the commit reads it again: on this single-threaded
    // runtime, the member's state cannot change in between.
    let (member_id, generation) = (member.member_id(), member.generation());
    let sent = now_ns();
    let result = member
        .commit_offsets(entries.iter().map(|e| (tp(e.partition), e.offset)))
        .await;
    let done = now_ns();
    let outcome = match result {
        Ok(()) => Outcome::Acked,
        Err(ClientError::PartitionsNotOwned { partitions, .. }) => {
            let refused: Vec<i32> = partitions.iter().map(|tp| tp.partition).collect();
            for p in &refused {
                owned.remove(p);
            }
            Outcome::NotOwned(refused)
        }
        Err(e) => Outcome::Failed(e.to_string()),
    };
    log.write(&Event::Commit {
        sent,
        done,
        member_id,
        generation,
        offsets: entries,
        outcome,
    })?;
    Ok(())
}
