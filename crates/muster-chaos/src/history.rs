//! What a run writes down, and reads back for the checker: each worker incarnation's
//! history (one JSON object per line, written as it happens, so a SIGKILL loses nothing
//! already written), and the runner's record of the run (faults, kills, the final offsets
//! and the server's offset history).
//!
//! Every time is nanoseconds on CLOCK_MONOTONIC ([`crate::clock`]), shared by all processes.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why a history or record could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {source}")]
    Parse {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{path}: the first line is not a `start` event")]
    NoStart { path: PathBuf },
}

/// One partition's offset in a commit, with the ownership epoch the worker held it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitEntry {
    pub partition: i32,
    pub offset: i64,
    pub epoch: i32,
}

/// How a commit ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The server answered NONE for every partition: acknowledged.
    Acked,
    /// These partitions were refused PARTITION_NOT_OWNED; the others' outcome is not known
    /// (the client reports only the refusal), so they count as not acknowledged.
    NotOwned(Vec<i32>),
    /// Any other error or a timeout: not acknowledged (it may still have been applied).
    Failed(String),
}

/// One line of a worker incarnation's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// The first line: who this is.
    Start {
        t: u64,
        group: String,
        worker: String,
        incarnation: u32,
        pid: u32,
        protocol: String,
    },
    /// The member's id or generation (consumer protocol: member epoch) changed, as the
    /// client's state showed it.
    Member {
        t: u64,
        member_id: String,
        generation: i32,
    },
    /// `Event::Assigned` received: owned from `t` on, with these ownership epochs.
    Assigned {
        t: u64,
        member_id: String,
        generation: i32,
        partitions: Vec<(i32, i32)>,
    },
    /// `Event::Revoked` handled (its commit done): stamped just before letting go.
    Revoked {
        t: u64,
        member_id: String,
        generation: i32,
        partitions: Vec<i32>,
    },
    /// `Event::Lost` received, or a commit refused PARTITION_NOT_OWNED.
    Lost {
        t: u64,
        member_id: String,
        generation: i32,
        partitions: Vec<i32>,
    },
    /// One commit: sent at `sent`, answered (or given up) at `done`.
    Commit {
        sent: u64,
        done: u64,
        member_id: String,
        generation: i32,
        offsets: Vec<CommitEntry>,
        outcome: Outcome,
    },
    /// The worker stopped by itself (a fatal member error).
    Exit { t: u64, reason: String },
}

impl Event {
    /// The event's time (a commit's: when it was answered).
    pub fn time(&self) -> u64 {
        match self {
            Event::Start { t, .. }
            | Event::Member { t, .. }
            | Event::Assigned { t, .. }
            | Event::Revoked { t, .. }
            | Event::Lost { t, .. }
            | Event::Exit { t, .. } => *t,
            Event::Commit { done, .. } => *done,
        }
    }
}

/// Appends events to a history file, one line each, each written whole at once.
#[derive(Debug)]
pub struct HistoryWriter {
    path: PathBuf,
    file: File,
}

impl HistoryWriter {
    pub fn create(path: &Path) -> Result<Self, HistoryError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| HistoryError::Io {
                path: path.to_owned(),
                source,
            })?;
        Ok(HistoryWriter {
            path: path.to_owned(),
            file,
        })
    }

    pub fn write(&mut self, event: &Event) -> Result<(), HistoryError> {
        let mut line = serde_json::to_vec(event).map_err(|source| HistoryError::Parse {
            path: self.path.clone(),
            line: 0,
            source,
        })?;
        line.push(b'\n');
        // One write(2) per line: a process killed between lines leaves whole lines.
        self.file
            .write_all(&line)
            .map_err(|source| HistoryError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// One incarnation's history, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    pub group: String,
    pub worker: String,
    pub incarnation: u32,
    pub protocol: String,
    pub events: Vec<Event>,
}

impl History {
    /// Reads a history file. A last line cut short (the process was killed while writing
    /// it) is dropped; any other bad line is an error.
    pub fn read(path: &Path) -> Result<History, HistoryError> {
        let io = |source| HistoryError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let lines: Vec<String> = BufReader::new(file)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(io)?;
        let mut events = Vec::with_capacity(lines.len());
        let last = lines.len().saturating_sub(1);
        for (i, line) in lines.iter().enumerate() {
            match serde_json::from_str::<Event>(line) {
                Ok(event) => events.push(event),
                Err(_) if i == last => {}
                Err(source) => {
                    return Err(HistoryError::Parse {
                        path: path.to_owned(),
                        line: i + 1,
                        source,
                    })
                }
            }
        }
        Self::from_events(events).ok_or_else(|| HistoryError::NoStart {
            path: path.to_owned(),
        })
    }

    /// A history from its events; `None` unless the first is `Start`.
    pub fn from_events(events: Vec<Event>) -> Option<History> {
        let Some(Event::Start {
            group,
            worker,
            incarnation,
            protocol,
            ..
        }) = events.first().cloned()
        else {
            return None;
        };
        Some(History {
            group,
            worker,
            incarnation,
            protocol,
            events,
        })
    }

    /// "group/worker#incarnation", for messages.
    pub fn name(&self) -> String {
        format!("{}/{}#{}", self.group, self.worker, self.incarnation)
    }
}

/// One fault the nemesis injected: what, on whom, from when to when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// `kill`, `pause` or `cut`.
    pub kind: String,
    /// `node:n1`, `etcd:m0`, `worker:<group>/<worker>`.
    pub target: String,
    pub start: u64,
    /// When it was healed (the process restarted or resumed, the link healed).
    pub end: u64,
    /// A second etcd member down at once: etcd had no quorum meanwhile.
    #[serde(default)]
    pub quorum_loss: bool,
}

/// A worker incarnation that ended by SIGKILL (the nemesis's, or the runner's at the end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Killed {
    pub group: String,
    pub worker: String,
    pub incarnation: u32,
    /// Just before the signal was sent: the process owned nothing after this.
    pub t: u64,
}

/// A group's committed offsets and the server's offset history at the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalState {
    /// Partition → committed offset (OffsetFetch after every worker was stopped).
    pub offsets: BTreeMap<i32, i64>,
    /// Partition → the history's (kind, offset, member id, generation), oldest first.
    pub history: BTreeMap<i32, Vec<(String, i64, String, i32)>>,
}

/// How a group settled after the faults stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settle {
    pub group: String,
    /// From "everything healed" to settled; `None`: not within the bound.
    pub after_ns: Option<u64>,
}

/// The runner's record of a run (`run.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub seed: u64,
    pub partitions: i32,
    /// Group → protocol.
    pub groups: BTreeMap<String, String>,
    pub started: u64,
    /// When the nemesis started (the groups had formed).
    #[serde(default)]
    pub nemesis_started: u64,
    pub faults: Vec<Fault>,
    pub killed: Vec<Killed>,
    /// When the nemesis stopped and everything was healed.
    pub healed: u64,
    /// The settle bound (module docs of `checker`).
    pub settle_bound_ns: u64,
    pub settled: Vec<Settle>,
    /// When the runner stopped the workers (every incarnation still running ended then).
    pub stopped: u64,
    pub finals: BTreeMap<String, FinalState>,
}

impl RunRecord {
    pub fn write(&self, path: &Path) -> Result<(), HistoryError> {
        let json = serde_json::to_vec_pretty(self).map_err(|source| HistoryError::Parse {
            path: path.to_owned(),
            line: 0,
            source,
        })?;
        std::fs::write(path, json).map_err(|source| HistoryError::Io {
            path: path.to_owned(),
            source,
        })
    }

    pub fn read(path: &Path) -> Result<RunRecord, HistoryError> {
        let bytes = std::fs::read(path).map_err(|source| HistoryError::Io {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|source| HistoryError::Parse {
            path: path.to_owned(),
            line: 0,
            source,
        })
    }
}

/// Every history under `dir` (`*.jsonl`, any depth), sorted by path.
pub fn read_histories(dir: &Path) -> Result<Vec<History>, HistoryError> {
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|source| HistoryError::Io {
            path: d.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| HistoryError::Io {
                path: d.clone(),
                source,
            })?;
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths.iter().map(|p| History::read(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_round_trips_and_a_torn_last_line_is_dropped() {
        let dir = std::env::temp_dir().join(format!("muster-chaos-h-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("w.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut w = HistoryWriter::create(&path).expect("create");
        let start = Event::Start {
            t: 1,
            group: "g".into(),
            worker: "w".into(),
            incarnation: 0,
            pid: 9,
            protocol: "classic".into(),
        };
        let commit = Event::Commit {
            sent: 2,
            done: 3,
            member_id: "m".into(),
            generation: 1,
            offsets: vec![CommitEntry {
                partition: 0,
                offset: 5,
                epoch: 1,
            }],
            outcome: Outcome::NotOwned(vec![1]),
        };
        w.write(&start).expect("write");
        w.write(&commit).expect("write");
        drop(w);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(b"{\"ev\":\"lost\",\"t\":4,")
            .expect("torn line");
        let h = History::read(&path).expect("read");
        assert_eq!(h.events, vec![start, commit]);
        assert_eq!(h.name(), "g/w#0");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
