//! Everything a run has running — etcd members, nodes, workers, and the network between
//! them — and the faults applied to it: inject, heal, restart what died by itself.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rustix::process::Signal;

use crate::clock::now_ns;
use crate::history::{Fault, Killed};
use crate::nemesis::{Class, Kind, Plan};
use crate::procs::{Binaries, EtcdMember, Node, Running, Worker};
use crate::proxy::Network;

/// The processes of a run and their network.
pub struct Cluster {
    pub bins: Binaries,
    pub net: Network,
    pub out: PathBuf,
    pub etcd: Vec<EtcdMember>,
    pub etcd_cluster: String,
    pub nodes: Vec<Node>,
    pub workers: Vec<Worker>,
    pub worker_args: Vec<String>,
    /// Worker incarnations killed (by the nemesis or at the end).
    pub killed: Vec<Killed>,
    /// Processes that exited without being killed, by class (a musterd exiting by itself
    /// is a crash worth a look in its log).
    pub exits: [usize; 3],
}

impl Cluster {
    /// The target's name in the record: `node:n1`, `etcd:m0`, `worker:<group>/<name>`.
    pub fn entity(&self, class: Class, index: usize) -> String {
        match class {
            Class::Node => self.nodes[index].entity(),
            Class::Etcd => self.etcd[index].entity(),
            Class::Worker => self.workers[index].entity(),
        }
    }

    fn running(&mut self, class: Class, index: usize) -> &mut Running {
        match class {
            Class::Node => &mut self.nodes[index].proc,
            Class::Etcd => &mut self.etcd[index].proc,
            Class::Worker => &mut self.workers[index].proc,
        }
    }

    /// Starts node `index` and points its proxy at it once it reports its address.
    pub fn start_node(&mut self, index: usize) -> Result<()> {
        let node = &mut self.nodes[index];
        let target = node.proxy.target();
        let addresses = node.start(&self.bins.musterd, &self.net)?;
        std::thread::spawn(move || {
            if let Ok(addr) = addresses.recv_timeout(Duration::from_secs(120)) {
                target.set(addr);
            }
        });
        Ok(())
    }

    pub fn start_etcd(&mut self, index: usize) -> Result<()> {
        let cluster = self.etcd_cluster.clone();
        self.etcd[index].start(&self.bins.etcd, &cluster, &self.net)
    }

    pub fn start_worker(&mut self, index: usize) -> Result<()> {
        let w = &mut self.workers[index];
        w.start(&self.bins, &self.worker_args, &self.out, &self.net)
    }

    /// Waits until every etcd member answers healthy.
    pub fn wait_etcd(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        while !self.etcd.iter().all(EtcdMember::healthy) {
            if Instant::now() > deadline {
                bail!(
                    "etcd did not become healthy within {within:?}: see its logs in {}",
                    self.out.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Waits until every node has reported its address.
    pub fn wait_nodes(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        while self.nodes.iter().any(|n| n.proxy.target().get().is_none()) {
            if Instant::now() > deadline {
                bail!(
                    "musterd did not start within {within:?}: see its logs in {}",
                    self.out.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Carries a fault out.
    pub fn inject(&mut self, plan: &Plan) {
        match plan.kind {
            Kind::Kill => self.kill(plan.class, plan.index),
            Kind::Pause => self.running(plan.class, plan.index).signal(Signal::STOP),
            Kind::Cut => {
                let entity = self.entity(plan.class, plan.index);
                self.net.cut(&entity);
            }
        }
    }

    /// SIGKILL; a worker's incarnation is written down as killed first.
    pub fn kill(&mut self, class: Class, index: usize) {
        if class == Class::Worker {
            let w = &self.workers[index];
            if w.proc.is_running() {
                self.killed.push(Killed {
                    group: w.group.clone(),
                    worker: w.name.clone(),
                    incarnation: w.incarnation,
                    t: now_ns(),
                });
            }
        }
        let running = self.running(class, index);
        let pid = running.pid();
        running.kill();
        if let Some(pid) = pid {
            self.net.unregister(pid);
        }
    }

    /// Ends a fault: restart, resume or heal. Returns the fault as recorded.
    pub fn heal(&mut self, plan: &Plan, start: u64) -> Result<Fault> {
        match plan.kind {
            Kind::Kill => self.restart(plan.class, plan.index)?,
            Kind::Pause => self.running(plan.class, plan.index).signal(Signal::CONT),
            Kind::Cut => {
                let entity = self.entity(plan.class, plan.index);
                self.net.heal(&entity);
            }
        }
        Ok(Fault {
            kind: plan.kind.to_string(),
            target: self.entity(plan.class, plan.index),
            start,
            end: now_ns(),
            quorum_loss: plan.quorum_loss,
        })
    }

    /// Starts a process again (a worker as its next incarnation).
    fn restart(&mut self, class: Class, index: usize) -> Result<()> {
        match class {
            Class::Node => self.start_node(index),
            Class::Etcd => self.start_etcd(index),
            Class::Worker => {
                self.workers[index].incarnation += 1;
                self.start_worker(index)
            }
        }
    }

    /// Restarts whatever exited by itself (`busy` says which targets a fault holds down).
    pub fn restart_exited(&mut self, busy: &dyn Fn(Class, usize) -> bool) -> Result<()> {
        for (class, count) in [
            (Class::Node, self.nodes.len()),
            (Class::Etcd, self.etcd.len()),
            (Class::Worker, self.workers.len()),
        ] {
            for index in 0..count {
                if busy(class, index) {
                    continue;
                }
                let running = self.running(class, index);
                let pid = running.pid();
                if running.exited() {
                    if let Some(pid) = pid {
                        self.net.unregister(pid);
                    }
                    self.exits[class as usize] += 1;
                    eprintln!(
                        "{} exited by itself; restarting it",
                        self.entity(class, index)
                    );
                    self.restart(class, index)?;
                }
            }
        }
        Ok(())
    }

    /// Kills every worker (written down as killed at the end).
    pub fn stop_workers(&mut self) {
        for index in 0..self.workers.len() {
            self.kill(Class::Worker, index);
        }
    }

    /// Kills everything else.
    pub fn stop_all(&mut self) {
        self.stop_workers();
        for node in &mut self.nodes {
            node.proc.kill();
        }
        for member in &mut self.etcd {
            member.proc.kill();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_all();
    }
}
