//! Whether a group has settled, judged live from its workers' histories: every partition
//! owned by exactly one running incarnation, and every partition with a commit acknowledged
//! since `since` and within the last `window`.

use std::path::Path;

use crate::checker::{group_view, End};
use crate::clock::now_ns;
use crate::history::{read_histories, Killed, RunRecord};

/// The group's state now (module docs): `Ok(())` if settled, else what is missing.
pub fn settled_now(
    out: &Path,
    group: &str,
    partitions: i32,
    killed: &[Killed],
    since: u64,
    window: u64,
) -> Result<(), String> {
    let dir = out.join("workers").join(group);
    let histories = read_histories(&dir).map_err(|e| e.to_string())?;
    let record = RunRecord {
        killed: killed.to_vec(),
        stopped: u64::MAX,
        ..RunRecord::default()
    };
    let view = group_view(group, &histories, &record);
    let now = now_ns();
    for p in 0..partitions {
        let owners = view
            .tenures
            .get(&p)
            .map_or(0, |ts| ts.iter().filter(|t| t.how == End::Open).count());
        if owners != 1 {
            return Err(format!("partition {p} has {owners} owners"));
        }
        let flowing = view.acked.get(&p).is_some_and(|acked| {
            acked
                .iter()
                .any(|a| a.done > since && a.done + window >= now)
        });
        if !flowing {
            return Err(format!("partition {p} has no recent acknowledged commit"));
        }
    }
    Ok(())
}
