//! An answer never carries a member epoch or assignment that the group's durable record does
//! not hold yet (`persist.rs`, `Group::seal`): a coordinator lost before the write lands would
//! otherwise have served an epoch the next one never saw (the chaos harness found a member
//! epoch going 216 -> 215 across a failover that way).

use super::harness::{Cg, HELD};

#[test]
fn an_answer_waits_for_the_record_holding_the_epoch_it_carries() {
    let mut cg = Cg::new();
    let a = cg.join("a", &["foo"]);
    assert_eq!(a.error_code, 0, "{a:?}");
    cg.hold_records = true;
    // b joins: the group epoch moves and a record write starts; it stays in flight.
    let b = cg.send(Cg::join_request("b", &["foo"]));
    assert_eq!(b.error_code, HELD, "b's answer waits for its record: {b:?}");
    assert_eq!(cg.records_in_flight(), 1);
    // a heartbeats meanwhile, twice with the same epoch: the first may change its state (b
    // takes partitions from it: a change owed to the next record write), the second changes
    // nothing and, before the fix, was answered at once with the epoch and assignment only
    // the owed record holds. Both wait.
    let first = cg.send(Cg::request("a", a.member_epoch));
    assert_eq!(first.error_code, HELD, "a's answer waits: {first:?}");
    let second = cg.send(Cg::request("a", a.member_epoch));
    assert_eq!(
        second.error_code, HELD,
        "a's repeated heartbeat waits too: {second:?}"
    );
    // The writes land: every answer goes, each once, and a's last epoch is the durable one.
    let mut answers = Vec::new();
    while cg.records_in_flight() > 0 {
        answers.extend(cg.land_record());
    }
    assert_eq!(answers.len(), 3, "{answers:?}");
    let written = cg.record.clone().expect("a record was written");
    let durable: i32 = written
        .consumer
        .as_ref()
        .and_then(|c| c.members.iter().find(|m| m.member_id == "a"))
        .map(|m| m.member_epoch)
        .expect("a in the record");
    for (_, answer) in &answers {
        if let muster_protocol::Response::ConsumerGroupHeartbeat(r) = answer {
            if r.member_id == "a" {
                assert!(r.member_epoch <= durable, "{r:?} vs durable {durable}");
            }
        }
    }
}
