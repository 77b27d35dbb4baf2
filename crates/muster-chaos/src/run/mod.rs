//! One run of the harness, start to finish: etcd and the nodes behind their proxies, the
//! topic, the workers of each group, the groups settling, the nemesis for the run's
//! duration, everything healed, the groups settling again within the bound, the workers
//! stopped, the final offsets and offset history read, the record written, and the checker.

mod cluster;
mod settle;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use muster_client::{Admin, Client, ClientConfig, ConnectionConfig, GroupProtocol};

use crate::checker::{check, CheckConfig, Report};
use crate::clock::{ms, now_ns};
use crate::history::{read_histories, FinalState, RunRecord, Settle};
use crate::nemesis::{Class, Nemesis, Plan};
use crate::procs::{Binaries, EtcdMember, Node, Worker};
use crate::proxy::Network;
pub use cluster::Cluster;
pub use settle::settled_now;

/// The topic every group consumes.
pub const TOPIC: &str = "chaos";
/// The client's silent-socket rule (muster-client's `SILENT_SOCKET`).
const SILENT_SOCKET: Duration = Duration::from_secs(10);
/// The workers' request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The members' rebalance timeout.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(10);
/// How recent the last acknowledged commit of every partition must be for "commits flow".
const FLOW_WINDOW: Duration = Duration::from_secs(5);

/// What a run does (the command line's options).
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub duration: Duration,
    pub seed: u64,
    pub protocols: Vec<GroupProtocol>,
    /// Workers in all, split evenly between the groups.
    pub workers: usize,
    pub nodes: usize,
    pub partitions: i32,
    pub out: PathBuf,
    pub musterd: Option<PathBuf>,
    /// Session timeout of both protocols' members.
    pub session: Duration,
    pub lease_ttl_s: u64,
    pub commit_interval: Duration,
}

impl RunConfig {
    /// The longest a zombie may take to notice (docs/reliability.md): its session, the
    /// client's silent-socket rule, one request timeout, and a lease TTL for its coordinator
    /// to be replaced.
    pub fn check_config(&self) -> CheckConfig {
        CheckConfig {
            notice_bound_ns: (self.session
                + SILENT_SOCKET
                + REQUEST_TIMEOUT
                + Duration::from_secs(self.lease_ttl_s))
            .as_nanos() as u64,
            flow_window_ns: FLOW_WINDOW.as_nanos() as u64,
        }
    }

    /// How long after everything is healed the groups must have settled
    /// (docs/reliability.md): a lease TTL for the nodes to take every shard again, two
    /// sessions for dead members to expire and the new incarnations to join, a rebalance
    /// timeout, the silent-socket rule, and 15 s for restarts and the machine's load.
    pub fn settle_bound(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_s)
            + 2 * self.session
            + REBALANCE_TIMEOUT
            + SILENT_SOCKET
            + Duration::from_secs(15)
    }
}

/// Runs the harness (module docs) and checks the result.
pub async fn run(cfg: &RunConfig) -> Result<(RunRecord, Report)> {
    let bins = Binaries::find(cfg.musterd.clone())?;
    let logs = cfg.out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("create {}", logs.display()))?;
    if cfg.out.join("workers").exists() {
        bail!(
            "{} already holds a run: give a new --out",
            cfg.out.display()
        );
    }
    let net = Network::new();
    let mut record = RunRecord {
        seed: cfg.seed,
        partitions: cfg.partitions,
        started: now_ns(),
        settle_bound_ns: cfg.settle_bound().as_nanos() as u64,
        ..RunRecord::default()
    };
    println!(
        "muster-chaos: seed {}, {:?}, {} workers, {} nodes, 3 etcd members, out {}",
        cfg.seed,
        cfg.duration,
        cfg.workers,
        cfg.nodes,
        cfg.out.display()
    );

    let mut etcd = Vec::new();
    for i in 0..3 {
        etcd.push(EtcdMember::new(&net, &format!("m{i}"), &logs).await?);
    }
    let etcd_cluster = etcd
        .iter()
        .map(EtcdMember::cluster_entry)
        .collect::<Vec<_>>()
        .join(",");
    let etcd_urls = etcd
        .iter()
        .map(|m| format!("http://{}", m.client.addr()))
        .collect::<Vec<_>>()
        .join(",");
    let node_args: Vec<String> = [
        "--cluster-etcd",
        &etcd_urls,
        "--lease-ttl-s",
        &cfg.lease_ttl_s.to_string(),
        "--shards",
        "8",
        "--initial-rebalance-delay-ms",
        "0",
        "--min-session-timeout-ms",
        "1000",
        "--consumer-heartbeat-interval-ms",
        "500",
        "--consumer-session-timeout-ms",
        &cfg.session.as_millis().to_string(),
        "--log-level",
        "info",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut nodes = Vec::new();
    for i in 1..=cfg.nodes {
        nodes.push(Node::new(&net, &format!("n{i}"), &logs, node_args.clone()).await?);
    }
    let bootstrap: Vec<String> = nodes.iter().map(|n| n.proxy.addr().to_string()).collect();
    let groups: Vec<(String, GroupProtocol)> = cfg
        .protocols
        .iter()
        .map(|p| (format!("chaos-{p}"), *p))
        .collect();
    let per_group = (cfg.workers / groups.len().max(1)).max(1);
    let mut workers = Vec::new();
    for (group, protocol) in &groups {
        record
            .groups
            .insert(group.clone(), protocol.name().to_owned());
        for i in 0..per_group {
            workers.push(Worker {
                group: group.clone(),
                name: format!("w{i:02}"),
                protocol: protocol.name().to_owned(),
                incarnation: 0,
                proc: Default::default(),
            });
        }
    }
    let worker_args: Vec<String> = vec![
        "--bootstrap".into(),
        bootstrap.join(","),
        "--topic".into(),
        TOPIC.into(),
        "--session-ms".into(),
        cfg.session.as_millis().to_string(),
        "--commit-ms".into(),
        cfg.commit_interval.as_millis().to_string(),
        "--seed".into(),
        cfg.seed.to_string(),
    ];
    let mut cluster = Cluster {
        bins,
        net,
        out: cfg.out.clone(),
        etcd,
        etcd_cluster,
        nodes,
        workers,
        worker_args,
        killed: Vec::new(),
        exits: [0; 3],
    };

    for i in 0..cluster.etcd.len() {
        cluster.start_etcd(i)?;
    }
    cluster.wait_etcd(Duration::from_secs(30))?;
    for i in 0..cluster.nodes.len() {
        cluster.start_node(i)?;
    }
    cluster.wait_nodes(Duration::from_secs(30))?;
    create_topic(&bootstrap, cfg.partitions).await?;
    for i in 0..cluster.workers.len() {
        cluster.start_worker(i)?;
    }
    let formed = now_ns();
    let names: Vec<String> = groups.iter().map(|(g, _)| g.clone()).collect();
    let took = wait_settled(&cluster, &names, cfg, formed).await;
    if let Some(group) = names.iter().find(|g| !took.contains_key(*g)) {
        bail!(
            "group {group} did not form within {:?} before any fault: see {}",
            cfg.settle_bound(),
            logs.display()
        );
    }
    println!(
        "groups formed in {:.0} ms; the nemesis starts",
        took.values().max().copied().map_or(0.0, ms)
    );

    record.nemesis_started = now_ns();
    chaos(&mut cluster, cfg, &mut record).await?;
    record.healed = now_ns();
    println!(
        "nemesis stopped after {} faults; everything healed; waiting for the groups to settle",
        record.faults.len()
    );
    let took = wait_settled(&cluster, &names, cfg, record.healed).await;
    for group in &names {
        let after_ns = took.get(group).copied();
        println!(
            "{group}: {}",
            after_ns.map_or("did not settle".to_owned(), |a| format!(
                "settled {:.0} ms after the heal",
                ms(a)
            ))
        );
        record.settled.push(Settle {
            group: group.clone(),
            after_ns,
        });
    }

    record.stopped = now_ns();
    cluster.stop_workers();
    for group in &names {
        record
            .finals
            .insert(group.clone(), final_state(&bootstrap, group).await?);
    }
    record.killed = cluster.killed.clone();
    cluster.stop_all();
    record.write(&cfg.out.join("run.json"))?;
    println!(
        "processes that exited by themselves: {} nodes, {} etcd members, {} workers",
        cluster.exits[0], cluster.exits[1], cluster.exits[2]
    );
    let histories = read_histories(&cfg.out.join("workers"))?;
    let report = check(&record, &histories, &cfg.check_config());
    Ok((record, report))
}

/// The nemesis for the run's duration, then every fault healed.
async fn chaos(cluster: &mut Cluster, cfg: &RunConfig, record: &mut RunRecord) -> Result<()> {
    let start = now_ns();
    let end = start + cfg.duration.as_nanos() as u64;
    let mut nemesis = Nemesis::new(
        cfg.seed,
        cluster.nodes.len(),
        cluster.etcd.len(),
        cluster.workers.len(),
        start,
    );
    // (ends at, plan, started at)
    let mut active: Vec<(u64, Plan, u64)> = Vec::new();
    let mut last_report = start;
    loop {
        let now = now_ns();
        let (over, going): (Vec<_>, Vec<_>) = active
            .into_iter()
            .partition(|(until, _, _)| *until <= now || now >= end);
        active = going;
        for (_, plan, began) in over {
            record.faults.push(cluster.heal(&plan, began)?);
            nemesis.healed(plan.class, plan.index);
        }
        if now >= end {
            break;
        }
        let busy: BTreeSet<(Class, usize)> =
            active.iter().map(|(_, p, _)| (p.class, p.index)).collect();
        cluster.restart_exited(&|c, i| busy.contains(&(c, i)))?;
        if let Some(plan) = nemesis.next(now) {
            cluster.inject(&plan);
            active.push((now + plan.duration_ns, plan, now_ns()));
        }
        if now - last_report >= 60_000_000_000 {
            last_report = now;
            println!(
                "{:.0} s: {} faults so far, {} active",
                ms(now - start) / 1000.0,
                record.faults.len(),
                active.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Whatever exited by itself during the last fault is started again too.
    cluster.restart_exited(&|_, _| false)?;
    Ok(())
}

/// Waits until each group has settled (twice in a row, 1 s apart) or the bound has passed;
/// returns, per settled group, how long after `since` it first was.
async fn wait_settled(
    cluster: &Cluster,
    groups: &[String],
    cfg: &RunConfig,
    since: u64,
) -> BTreeMap<String, u64> {
    let bound = since + cfg.settle_bound().as_nanos() as u64;
    let mut first_ok: BTreeMap<String, u64> = BTreeMap::new();
    let mut done: BTreeMap<String, u64> = BTreeMap::new();
    let mut last_why = BTreeMap::new();
    while now_ns() < bound && done.len() < groups.len() {
        for group in groups {
            if done.contains_key(group) {
                continue;
            }
            let now = now_ns();
            match settled_now(
                &cluster.out,
                group,
                cfg.partitions,
                &cluster.killed,
                since,
                FLOW_WINDOW.as_nanos() as u64,
            ) {
                Ok(()) => match first_ok.get(group) {
                    Some(&t) if now - t >= 1_000_000_000 => {
                        done.insert(group.clone(), t - since);
                    }
                    Some(_) => {}
                    None => {
                        first_ok.insert(group.clone(), now);
                    }
                },
                Err(why) => {
                    first_ok.remove(group);
                    last_why.insert(group.clone(), why);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for (group, why) in last_why.iter().filter(|(g, _)| !done.contains_key(*g)) {
        println!("{group} not settled: {why}");
    }
    done
}

/// A client of the cluster for the runner's own requests.
async fn admin(bootstrap: &[String]) -> Result<Admin> {
    let first = bootstrap.first().cloned().unwrap_or_default();
    let config = ClientConfig {
        bootstrap: bootstrap.to_vec(),
        connection: ConnectionConfig::new(first)
            .client_id("muster-chaos")
            .request_timeout(REQUEST_TIMEOUT),
    };
    Ok(Admin::new(Client::connect(config).await?))
}

/// Creates the topic, retrying while the cluster forms.
async fn create_topic(bootstrap: &[String], partitions: i32) -> Result<()> {
    let deadline = now_ns() + 60_000_000_000;
    loop {
        let attempt = async {
            admin(bootstrap)
                .await?
                .ensure_topic(TOPIC, partitions)
                .await
                .map_err(anyhow::Error::from)
        };
        match attempt.await {
            Ok(_) => return Ok(()),
            Err(e) if now_ns() > deadline => return Err(e.context("create the topic")),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The group's committed offsets and offset history, retried for up to a minute.
async fn final_state(bootstrap: &[String], group: &str) -> Result<FinalState> {
    let deadline = now_ns() + 60_000_000_000;
    loop {
        let attempt = async {
            let admin = admin(bootstrap).await?;
            let offsets = admin.fetch_offsets(group, None).await?;
            let history = admin.offset_history(group, Some(TOPIC), None, 0).await?;
            let mut state = FinalState::default();
            for (tp, o) in offsets {
                state.offsets.insert(tp.partition, o.offset);
            }
            for topic in history.topics {
                for p in topic.partitions {
                    let entries = p
                        .entries
                        .into_iter()
                        .rev()
                        .map(|e| (e.kind, e.offset, e.member_id, e.generation_id))
                        .collect();
                    state.history.insert(p.partition, entries);
                }
            }
            anyhow::Ok(state)
        };
        match attempt.await {
            Ok(state) => return Ok(state),
            Err(e) if now_ns() > deadline => {
                return Err(e.context(format!("read the final offsets of {group}")))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}
