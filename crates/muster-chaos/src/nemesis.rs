//! The fault schedule: what to break next, on whom, for how long, drawn from the run's seed
//! (the same seed gives the same sequence of draws; a draw whose target is still faulted or
//! that would break a limit is skipped, which depends on when faults end, so two runs of a
//! seed carry out nearly the same faults; what the processes do meanwhile is not
//! reproducible). The runner ([`crate::run`]) carries the faults out and heals them.
//!
//! Faults: SIGKILL (and a restart when it ends), SIGSTOP (SIGCONT when it ends), and a
//! network cut (healed when it ends) of a musterd node, an etcd member or a worker. Limits
//! keep the system able to make progress most of the time: at most all nodes but one and a
//! third of the workers faulted at once, and one etcd member — except that now and then
//! (15 % of the etcd faults that find one member already down) a second member goes too,
//! for at most 3 s: etcd loses its quorum briefly.

use std::collections::BTreeSet;
use std::fmt;

use crate::rng::Rng;

const MS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Node,
    Etcd,
    Worker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Kill,
    Pause,
    Cut,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::Node => "node",
            Class::Etcd => "etcd",
            Class::Worker => "worker",
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Kill => "kill",
            Kind::Pause => "pause",
            Kind::Cut => "cut",
        })
    }
}

/// One fault to inject now, to be healed after `duration_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub kind: Kind,
    pub class: Class,
    pub index: usize,
    pub duration_ns: u64,
    /// This fault takes a second etcd member down: no quorum while it lasts.
    pub quorum_loss: bool,
}

/// The schedule (module docs).
#[derive(Debug)]
pub struct Nemesis {
    rng: Rng,
    sizes: [usize; 3],
    busy: BTreeSet<(Class, usize)>,
    next_at: u64,
}

impl Nemesis {
    pub fn new(seed: u64, nodes: usize, etcd: usize, workers: usize, now: u64) -> Self {
        Nemesis {
            rng: Rng::new(seed),
            sizes: [nodes, etcd, workers],
            busy: BTreeSet::new(),
            next_at: now,
        }
    }

    fn busy_of(&self, class: Class) -> usize {
        self.busy.iter().filter(|(c, _)| *c == class).count()
    }

    /// The next fault if one is due at `now` and the limits allow it (the target is then
    /// busy until [`Nemesis::healed`]).
    pub fn next(&mut self, now: u64) -> Option<Plan> {
        if now < self.next_at {
            return None;
        }
        self.next_at = now + self.rng.range(500, 2_500) * MS;
        let class = match self.rng.range(0, 99) {
            0..=29 => Class::Node,
            30..=54 => Class::Etcd,
            _ => Class::Worker,
        };
        let kind = match self.rng.range(0, 2) {
            0 => Kind::Kill,
            1 => Kind::Pause,
            _ => Kind::Cut,
        };
        let size = self.sizes[class as usize];
        let index = self.rng.range(0, size.saturating_sub(1) as u64) as usize;
        let mut duration_ns = match kind {
            Kind::Kill => self.rng.range(1_000, 6_000),
            Kind::Pause => self.rng.range(1_000, 15_000),
            Kind::Cut => self.rng.range(1_000, 15_000),
        } * MS;
        let busy = self.busy_of(class);
        let mut quorum_loss = false;
        let allowed = match class {
            Class::Node => busy + 1 < size,
            Class::Worker => busy < size / 3,
            Class::Etcd if busy == 0 => true,
            Class::Etcd => {
                quorum_loss = busy == 1 && self.rng.chance(15);
                duration_ns = duration_ns.min(3_000 * MS);
                quorum_loss
            }
        };
        if size == 0 || !allowed || self.busy.contains(&(class, index)) {
            return None;
        }
        self.busy.insert((class, index));
        Some(Plan {
            kind,
            class,
            index,
            duration_ns,
            quorum_loss,
        })
    }

    /// The fault on `(class, index)` has been healed.
    pub fn healed(&mut self, class: Class, index: usize) {
        self.busy.remove(&(class, index));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the schedule for `secs` seconds, healing each fault when it ends.
    fn schedule(seed: u64, secs: u64) -> Vec<(u64, Plan)> {
        let mut n = Nemesis::new(seed, 3, 3, 24, 0);
        let mut active: Vec<(u64, Plan)> = Vec::new();
        let mut all = Vec::new();
        for step in 0..secs * 4 {
            let now = step * 250 * MS;
            active.retain(|(end, p)| {
                let over = *end <= now;
                if over {
                    n.healed(p.class, p.index);
                }
                !over
            });
            if let Some(p) = n.next(now) {
                active.push((now + p.duration_ns, p));
                all.push((now, p));
            }
            let count = |c: Class| active.iter().filter(|(_, p)| p.class == c).count();
            assert!(count(Class::Node) <= 2, "a node always stays up");
            assert!(count(Class::Worker) <= 8, "at most a third of the workers");
            assert!(count(Class::Etcd) <= 2, "at most two etcd members");
        }
        all
    }

    #[test]
    fn one_seed_gives_one_schedule_within_the_limits_and_with_every_kind() {
        let a = schedule(42, 600);
        assert_eq!(a, schedule(42, 600));
        assert_ne!(a, schedule(43, 600));
        for class in [Class::Node, Class::Etcd, Class::Worker] {
            for kind in [Kind::Kill, Kind::Pause, Kind::Cut] {
                assert!(
                    a.iter().any(|(_, p)| p.class == class && p.kind == kind),
                    "{kind} {class} in 10 minutes"
                );
            }
        }
        assert!(
            a.iter().any(|(_, p)| p.quorum_loss),
            "a quorum loss in 10 minutes"
        );
        assert!(a
            .iter()
            .filter(|(_, p)| p.quorum_loss)
            .all(|(_, p)| p.duration_ns <= 3_000 * MS));
    }
}
