//! What the container tests read in the CLI's JSON about the example workers' group: whether
//! it is Stable with exactly the expected workers sharing a topic's partitions, and its
//! committed offsets.

use std::collections::BTreeMap;

use serde_json::Value;

/// Partitions the example workers create their topic with.
pub const PARTITIONS: i64 = 6;

/// The group (`muster --json groups describe`) is Stable with exactly the workers `names`
/// (client ids), every partition of `topic` owned by exactly one of them and each owning
/// some. Gives the generation.
pub fn stable_with(group: &Value, topic: &str, names: &[&str]) -> Result<i64, String> {
    let state = group["state"].as_str().unwrap_or_default();
    let members = group["members"].as_array().cloned().unwrap_or_default();
    let mut clients: Vec<&str> = members
        .iter()
        .filter_map(|m| m["client_id"].as_str())
        .collect();
    clients.sort_unstable();
    if state != "Stable" || clients != names {
        return Err(format!("{state} with {clients:?}"));
    }
    let mut owned: Vec<i64> = Vec::new();
    for member in &members {
        let mine: Vec<i64> = member["assignment"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["topic"] == topic)
            .flat_map(|a| a["partitions"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p.as_i64())
            .collect();
        if mine.is_empty() {
            return Err(format!("{} owns nothing: {group}", member["client_id"]));
        }
        owned.extend(mine);
    }
    owned.sort_unstable();
    if owned != (0..PARTITIONS).collect::<Vec<_>>() {
        return Err(format!("partitions owned {owned:?}: {group}"));
    }
    group["generation"]
        .as_i64()
        .ok_or_else(|| format!("no generation: {group}"))
}

/// Partition → offset, from `muster --json offsets get`.
pub fn offsets(got: &Value) -> BTreeMap<i64, i64> {
    got["offsets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| Some((o["partition"].as_i64()?, o["offset"].as_i64()?)))
        .collect()
}
