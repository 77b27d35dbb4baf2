//! `hostile`: what one hostile client does to everyone else — the server's memory, whether it
//! survives, and the heartbeat latency of other groups while the attack goes on.
//!
//! Victims: `groups` groups of `members` Stable members (formed by a [`Cohort`], which keeps
//! their own slow heartbeats going), and for each member a task that sends its Heartbeat every
//! `victim_heartbeat` (a steady rate, not flat out) over a few shared connections, recording
//! each latency in the histogram of the phase it was answered in. A heartbeat not answered
//! within 2 s counts as an error (and as 2 s of latency).
//!
//! Beside the victims, one polite member ([`polite`]) rejoins, syncs, commits and heartbeats
//! in a loop, so each phase also shows whether a member could still do all of that, and how
//! fast.
//!
//! Phases: `baseline` (no attack), then one phase per attack ([`crate::attack`]), each run by
//! one client until the phase ends, then `recovery` (no attack). A watchdog samples the
//! server's `VmRSS` every 100 ms (the peak and end of each phase are reported) and, for a
//! server this run started, kills it when its RSS passes `rss_limit`, so that an attack that
//! would exhaust memory ends the attack, not the machine. After each phase the server is
//! checked (process alive, Hello answered within 2 s); a server that died, was killed or does
//! not answer is restarted (for a spawned server: fresh data directory) with fresh victims, so
//! the remaining attacks still meet a server.

mod polite;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use muster_protocol::{ErrorCode, HeartbeatRequest, Response};
use serde::Serialize;

use super::{Common, Report, CLIENT_ID};
use crate::attack::{self, Attack, Env, Outcomes, Tally};
use crate::client::{connect_many, Conn};
use crate::cohort::Cohort;
use crate::member::MemberConfig;
use crate::stats::{Latencies, LatencySummary};
use crate::target::{process_alive, rss_bytes, Target};

pub use self::polite::PoliteFigures;

#[derive(Debug, Clone)]
pub struct Options {
    pub groups: usize,
    pub members: usize,
    pub victim_heartbeat: Duration,
    /// Connections the victims' measured heartbeats share.
    pub victim_connections: usize,
    pub baseline: Duration,
    /// Length of each attack's phase.
    pub phase: Duration,
    pub recovery: Duration,
    pub attacks: Vec<Attack>,
    /// Connections one attack may use (the floods excepted).
    pub attack_connections: usize,
    pub flood_connections: usize,
    pub admin_connections: usize,
    /// Requests (or connections) one attack sends at most.
    pub max_requests: u64,
    /// The server's frame limit.
    pub max_frame: usize,
    /// RSS at which the watchdog kills a spawned server.
    pub rss_limit: u64,
    /// Restart a spawned server (fresh data directory, fresh victims) after every attack but
    /// the last, so that each attack meets a server in its working state rather than one
    /// holding what earlier attacks left behind.
    pub fresh_server: bool,
}

const MIB: f64 = 1_048_576.0;

/// How long a victim waits for a heartbeat's answer.
const VICTIM_LIMIT: Duration = Duration::from_secs(2);

// ------------------------------------------------------------------------------------------
// Victims
// ------------------------------------------------------------------------------------------

#[derive(Debug)]
struct VictimPhase {
    latencies: Latencies,
    ok: u64,
    errors: BTreeMap<String, u64>,
}

#[derive(Default)]
struct VictimBook {
    phase: AtomicUsize,
    phases: Mutex<Vec<VictimPhase>>,
}

impl VictimBook {
    fn record(&self, elapsed: Duration, outcome: std::result::Result<(), String>) {
        let phase = self.phase.load(Ordering::Relaxed);
        let mut phases = self.phases.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(p) = phases.get_mut(phase) else {
            return;
        };
        match outcome {
            Ok(()) => {
                p.ok += 1;
                p.latencies.record(elapsed);
            }
            Err(label) => {
                if label == "timeout" {
                    p.latencies.record(elapsed);
                }
                *p.errors.entry(label).or_default() += 1;
            }
        }
    }

    /// Starts recording into a new phase; returns its index.
    fn begin(&self) -> Result<usize> {
        let mut phases = self.phases.lock().unwrap_or_else(PoisonError::into_inner);
        phases.push(VictimPhase {
            latencies: Latencies::new()?,
            ok: 0,
            errors: BTreeMap::new(),
        });
        let index = phases.len() - 1;
        self.phase.store(index, Ordering::Relaxed);
        Ok(index)
    }

    fn figures(&self, index: usize) -> VictimFigures {
        let phases = self.phases.lock().unwrap_or_else(PoisonError::into_inner);
        phases
            .get(index)
            .map_or_else(VictimFigures::default, |p| VictimFigures {
                ok: p.ok,
                errors: p.errors.clone(),
                latency: p.latencies.summary(),
            })
    }
}

/// The victims of one server: its cohort and the measured heartbeat tasks.
struct Victims {
    cohort: Cohort,
    /// The measured heartbeats, and the polite member.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    first_group: String,
}

impl Victims {
    async fn start(
        addr: SocketAddr,
        run_id: &str,
        opts: &Options,
        book: &Arc<VictimBook>,
        polite: &Arc<polite::Book>,
    ) -> Result<Victims> {
        let total = opts.groups.max(1) * opts.members.max(1);
        let setup = connect_many(addr, total.div_ceil(50).clamp(1, 20), CLIENT_ID).await?;
        let mut cohort = Cohort::new(
            setup,
            MemberConfig {
                topic: "bench-victim".to_owned(),
                partitions: 4,
                session_timeout_ms: 30_000,
                rebalance_timeout_ms: 60_000,
                heartbeat: Duration::from_secs(3),
                report_heartbeats: false,
            },
        )?;
        for g in 0..opts.groups.max(1) {
            cohort.add_group(&format!("{run_id}-victim-{g}"), opts.members.max(1))?;
        }
        cohort.settle(Duration::from_secs(120)).await?;
        let conns = connect_many(addr, opts.victim_connections.max(1), CLIENT_ID).await?;
        let every = opts.victim_heartbeat.max(Duration::from_millis(1));
        let mut tasks = Vec::new();
        for (k, (group, member, generation)) in cohort.stable_members().into_iter().enumerate() {
            let conn: Conn = conns
                .get(k % conns.len())
                .cloned()
                .context("no victim connection")?;
            let book = Arc::clone(book);
            let request = HeartbeatRequest {
                group_id: group.to_string(),
                generation_id: generation,
                member_id: member.to_string(),
                group_instance_id: None,
            };
            // Spread the members over the interval (golden-ratio steps).
            let phase = every.mul_f64((k as f64 * 0.618_033_988_75).fract());
            tasks.push(tokio::spawn(async move {
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + phase, every);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    let started = Instant::now();
                    let answer = conn.call_within(VICTIM_LIMIT, request.clone()).await;
                    let outcome = match answer {
                        Ok(Response::Heartbeat(h)) if h.error_code == ErrorCode::None.code() => {
                            Ok(())
                        }
                        Ok(other) => Err(ErrorCode::from_code(other.error_code())
                            .map_or_else(|| other.error_code().to_string(), |c| c.name().into())),
                        Err(e) if e.to_string().starts_with("no answer") => {
                            Err("timeout".to_owned())
                        }
                        Err(_) => Err("disconnected".to_owned()),
                    };
                    book.record(started.elapsed(), outcome);
                }
            }));
        }
        tasks.push(polite::spawn(
            addr,
            format!("{run_id}-polite"),
            Arc::clone(polite),
        ));
        Ok(Victims {
            cohort,
            tasks,
            first_group: format!("{run_id}-victim-0"),
        })
    }

    /// Stops the measured heartbeats and the members (leaving their groups if `polite`).
    async fn stop(self, polite: bool) {
        for task in &self.tasks {
            task.abort();
        }
        if polite {
            let _ = tokio::time::timeout(Duration::from_secs(10), self.cohort.shutdown()).await;
        }
    }
}

// ------------------------------------------------------------------------------------------
// Memory watchdog
// ------------------------------------------------------------------------------------------

/// Samples the server's RSS every 100 ms; kills a spawned server over the limit.
struct Watchdog {
    pid: AtomicU32,
    peak: AtomicU64,
    last: AtomicU64,
    /// RSS at which it killed the server, since the last [`Watchdog::reset`].
    killed_at: AtomicU64,
    may_kill: AtomicBool,
    limit: u64,
}

impl Watchdog {
    fn start(pid: u32, may_kill: bool, limit: u64) -> Arc<Watchdog> {
        let dog = Arc::new(Watchdog {
            pid: AtomicU32::new(pid),
            peak: AtomicU64::new(0),
            last: AtomicU64::new(0),
            killed_at: AtomicU64::new(0),
            may_kill: AtomicBool::new(may_kill),
            limit,
        });
        let weak = Arc::downgrade(&dog);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_millis(100));
            while let Some(dog) = weak.upgrade() {
                dog.sample();
                drop(dog);
                ticks.tick().await;
            }
        });
        dog
    }

    fn sample(&self) {
        let pid = self.pid.load(Ordering::Relaxed);
        let Ok(rss) = rss_bytes(pid) else {
            return;
        };
        self.last.store(rss, Ordering::Relaxed);
        self.peak.fetch_max(rss, Ordering::Relaxed);
        if rss > self.limit
            && self.may_kill.load(Ordering::Relaxed)
            && self.killed_at.load(Ordering::Relaxed) == 0
        {
            self.killed_at.store(rss, Ordering::Relaxed);
            // Only ever our own child (may_kill is set for spawned servers only); it stays
            // a zombie until the target reaps it, so the pid cannot have been reused.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    /// Starts a new phase: the peak restarts from the current reading.
    fn begin_phase(&self) {
        self.sample();
        self.peak
            .store(self.last.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    fn follow(&self, pid: u32) {
        self.pid.store(pid, Ordering::Relaxed);
        self.killed_at.store(0, Ordering::Relaxed);
        self.last.store(0, Ordering::Relaxed);
        self.sample();
    }
}

// ------------------------------------------------------------------------------------------
// Phases
// ------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, Serialize)]
pub struct VictimFigures {
    pub ok: u64,
    pub errors: BTreeMap<String, u64>,
    pub latency: LatencySummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseFigures {
    pub name: String,
    pub seconds: f64,
    pub victim: VictimFigures,
    pub polite: PoliteFigures,
    pub rss_start_mib: Option<f64>,
    pub rss_end_mib: Option<f64>,
    pub rss_peak_mib: Option<f64>,
    /// Peak RSS above the end of the baseline phase (the working set; after a restart, the
    /// new server's RSS once its victims are formed).
    pub rss_peak_over_baseline_mib: Option<f64>,
    pub killed_by_watchdog_at_mib: Option<f64>,
    /// The process is running (when its pid is known).
    pub alive: bool,
    /// It answered a Hello within 2 s after the phase.
    pub responsive: bool,
    /// It was restarted (with fresh victims) after this phase.
    pub restarted: bool,
    pub attack: Option<Outcomes>,
}

#[derive(Debug, Serialize)]
struct Figures {
    scenario: &'static str,
    groups: usize,
    members_per_group: usize,
    victim_heartbeat_ms: f64,
    attack_connections: usize,
    rss_limit_mib: f64,
    baseline_rss_mib: Option<f64>,
    phases: Vec<PhaseFigures>,
    /// Phases after which the server had to be restarted.
    restarts: usize,
    /// Why the run ended before its last phase, if it did.
    stopped_early: Option<String>,
}

/// Whether a server answers Hello at `addr` within 2 s.
async fn responsive(addr: SocketAddr) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(2), Conn::connect(addr, "bench-probe")).await,
        Ok(Ok(_))
    )
}

/// `hostile`: victims, the baseline, each attack, the recovery.
pub async fn run(common: &Common, opts: &Options, target: &mut Target) -> Result<Report> {
    let book = Arc::new(VictimBook::default());
    let polite_book = Arc::new(polite::Book::default());
    let watchdog = target
        .pid
        .map(|pid| Watchdog::start(pid, target.is_spawned(), opts.rss_limit));
    let mut victims =
        Some(Victims::start(target.addr, &common.run_id, opts, &book, &polite_book).await?);
    let mut phases: Vec<PhaseFigures> = Vec::new();
    let mut baseline_rss: Option<u64> = None;
    let mut restarts = 0usize;
    let mut stopped_early: Option<String> = None;

    let mut plan: Vec<(String, Option<Attack>, Duration)> =
        vec![("baseline".to_owned(), None, opts.baseline)];
    plan.extend(
        opts.attacks
            .iter()
            .map(|a| (a.name().to_owned(), Some(*a), opts.phase)),
    );
    plan.push(("recovery".to_owned(), None, opts.recovery));

    // The last segment: recovery, after the last attack.
    let recovery_segment = plan.len() - 1;
    for (segment, (name, attack, length)) in plan.into_iter().enumerate() {
        eprintln!("hostile: phase {name}");
        let index = book.begin()?;
        polite_book.begin(index)?;
        if let Some(dog) = &watchdog {
            dog.begin_phase();
        }
        let rss_start = watchdog
            .as_ref()
            .map(|dog| dog.last.load(Ordering::Relaxed));
        let started = Instant::now();
        let deadline = started + length;
        let tally = Tally::default();
        if let Some(attack) = attack {
            let env = Env {
                addr: target.addr,
                admin: target.admin,
                run_id: format!("{}-{segment}", common.run_id),
                victim_group: victims
                    .as_ref()
                    .map_or_else(String::new, |v| v.first_group.clone()),
                connections: opts.attack_connections.max(1),
                flood_connections: opts.flood_connections,
                admin_connections: opts.admin_connections,
                max_frame: opts.max_frame,
                max_requests: opts.max_requests,
                deadline,
            };
            let run = attack::run(attack, &env, &tally);
            // The attack stops itself at its deadline; a little grace, then it is dropped.
            match tokio::time::timeout(length + Duration::from_secs(5), run).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => eprintln!("hostile: attack {name} failed: {e:#}"),
                Err(_) => eprintln!("hostile: attack {name} overran its phase"),
            }
        }
        let now = Instant::now();
        if now < deadline {
            tokio::time::sleep(deadline - now).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let alive = target.pid.is_none_or(process_alive);
        let answers = alive && responsive(target.addr).await;
        let (rss_end, rss_peak, killed) = match &watchdog {
            Some(dog) => {
                dog.sample();
                let killed = dog.killed_at.load(Ordering::Relaxed);
                (
                    alive.then(|| dog.last.load(Ordering::Relaxed)),
                    Some(dog.peak.load(Ordering::Relaxed)),
                    (killed > 0).then_some(killed),
                )
            }
            None => (None, None, None),
        };
        if attack.is_none() && index == 0 {
            baseline_rss = rss_end;
        }
        let mib = |b: u64| b as f64 / MIB;
        let mut figures = PhaseFigures {
            name,
            seconds,
            victim: book.figures(index),
            polite: polite_book.figures(index),
            rss_start_mib: rss_start.map(mib),
            rss_end_mib: rss_end.map(mib),
            rss_peak_mib: rss_peak.map(mib),
            rss_peak_over_baseline_mib: rss_peak
                .zip(baseline_rss)
                .map(|(p, b)| (p as f64 - b as f64) / MIB),
            killed_by_watchdog_at_mib: killed.map(mib),
            alive,
            responsive: answers,
            restarted: false,
            attack: attack.map(|_| tally.snapshot()),
        };
        // With `fresh_server`, every attack but the last (whose after-effects `recovery`
        // measures) is followed by a fresh server, so the next one starts from a clean state.
        let fresh = opts.fresh_server && attack.is_some() && segment + 1 < recovery_segment;
        if (!answers || fresh) && target.is_spawned() {
            eprintln!(
                "hostile: {} after {}; restarting it",
                if answers {
                    "fresh server"
                } else {
                    "the server is down"
                },
                figures.name
            );
            if let Some(old) = victims.take() {
                old.stop(false).await;
            }
            let run_id = format!("{}-r{restarts}", common.run_id);
            let restarted = async {
                target.restart()?;
                if let (Some(dog), Some(pid)) = (&watchdog, target.pid) {
                    dog.follow(pid);
                }
                Victims::start(target.addr, &run_id, opts, &book, &polite_book).await
            }
            .await;
            match restarted {
                Ok(v) => victims = Some(v),
                Err(e) => {
                    // Report what was measured rather than nothing.
                    stopped_early = Some(format!("restart after {} failed: {e:#}", figures.name));
                    phases.push(figures);
                    break;
                }
            }
            // The new server's working set is the baseline from here on.
            if let Some(dog) = &watchdog {
                dog.sample();
                baseline_rss = Some(dog.last.load(Ordering::Relaxed));
            }
            restarts += 1;
            figures.restarted = true;
        }
        phases.push(figures);
    }
    if let Some(victims) = victims {
        victims.stop(true).await;
    }

    let figures = Figures {
        scenario: "hostile",
        groups: opts.groups,
        members_per_group: opts.members,
        victim_heartbeat_ms: super::ms(opts.victim_heartbeat),
        attack_connections: opts.attack_connections,
        rss_limit_mib: opts.rss_limit as f64 / MIB,
        baseline_rss_mib: baseline_rss.map(|b| b as f64 / MIB),
        phases,
        restarts,
        stopped_early,
    };
    Ok(Report::new(text(&figures), &figures))
}

fn text(f: &Figures) -> String {
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
    let mut out = format!(
        "hostile: {} groups × {} members, a heartbeat every {:.0} ms each; attacker up to {} \
         connections; watchdog at {:.0} MiB; baseline RSS {} MiB\n",
        f.groups,
        f.members_per_group,
        f.victim_heartbeat_ms,
        f.attack_connections,
        f.rss_limit_mib,
        opt(f.baseline_rss_mib),
    );
    out.push_str(&format!(
        "{:<14} {:>9} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>7} {:>8} {:>8} {:>8}  server\n",
        "phase",
        "hb p50",
        "hb p99",
        "hb max",
        "hb err",
        "polite",
        "cycle p99",
        "cycle max",
        "p err",
        "RSS end",
        "RSS peak",
        "Δ base"
    ));
    for p in &f.phases {
        let errors: u64 = p.victim.errors.values().sum();
        let server = match (p.killed_by_watchdog_at_mib, p.alive, p.responsive) {
            (Some(at), _, _) => format!("KILLED by watchdog at {at:.0} MiB"),
            (None, false, _) => "DEAD".to_owned(),
            (None, true, false) => "UNRESPONSIVE".to_owned(),
            (None, true, true) => "ok".to_owned(),
        };
        let polite_errors: u64 = p.polite.errors.values().sum();
        out.push_str(&format!(
            "{:<14} {:>9} {:>9} {:>9} {:>7} {:>7} {:>9} {:>9} {:>7} {:>8} {:>8} {:>8}  {server}{}\n",
            p.name,
            crate::stats::fmt_us(p.victim.latency.p50_us),
            crate::stats::fmt_us(p.victim.latency.p99_us),
            crate::stats::fmt_us(p.victim.latency.max_us),
            errors,
            p.polite.cycles,
            crate::stats::fmt_us(p.polite.cycle.p99_us),
            crate::stats::fmt_us(p.polite.cycle.max_us),
            polite_errors,
            opt(p.rss_end_mib),
            opt(p.rss_peak_mib),
            opt(p.rss_peak_over_baseline_mib),
            if p.restarted { " (restarted)" } else { "" },
        ));
        if !p.victim.errors.is_empty() {
            out.push_str(&format!("{:<14} victim errors {:?}\n", "", p.victim.errors));
        }
        if !p.polite.errors.is_empty() {
            out.push_str(&format!("{:<14} polite errors {:?}\n", "", p.polite.errors));
        }
        if let Some(o) = &p.attack {
            out.push_str(&format!(
                "{:<14} attack: sent {}, disconnects {}, connect failures {}, stalls {}\n",
                "", o.sent, o.disconnects, o.connect_failures, o.stalls
            ));
            if !o.answers.is_empty() {
                out.push_str(&format!("{:<14}   answers {:?}\n", "", o.answers));
            }
            if !o.extra.is_empty() {
                out.push_str(&format!("{:<14}   {:?}\n", "", o.extra));
            }
        }
    }
    if let Some(why) = &f.stopped_early {
        out.push_str(&format!("stopped early: {why}\n"));
    }
    out
}
