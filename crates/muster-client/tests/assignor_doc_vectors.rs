//! The assignor vectors of `docs/assignors.md`, run against the real assignors, so that the
//! specification a client in another language implements cannot drift from the Rust members it
//! must share a group with.
//!
//! Two kinds of fenced block are read (text after `#` is a comment; blank lines are ignored):
//!
//! ~~~text
//! ```assignment <name>              ```user-data <name>
//! assignor <assignor name>          assignor <assignor name>
//! topic <topic> <partition count>   generation <i32>
//! member <id> <topic,topic | ->     partitions <tp-list>
//! instance <member> <instance id>   hex <bytes> ...          (repeatable; none = empty)
//! owned <member> <tp-list>          ```
//! user_data <member> <bytes> ...
//! expect <member> <tp-list>
//! ```
//! ~~~
//!
//! A `<tp-list>` is space-separated `topic:p,p,p` items, or `-` for none. An `assignment`
//! block runs the assignor over its members (in the order listed) and the topics, and checks
//! every member's result; a `user-data` block checks the bytes a member sends with its
//! JoinGroup for that assignor, and for the sticky assignors that they decode back.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use muster_client::assignor::builtin;
use muster_client::assignor::sticky::StickyUserData;
use muster_client::partition::group_partitions;
use muster_client::{MemberSubscription, TopicPartition, TopicPartitions};

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/assignors.md");

/// One fenced block: its kind (`assignment` / `user-data`), name and lines, comments removed.
#[derive(Debug)]
struct Block {
    kind: String,
    name: String,
    lines: Vec<Vec<String>>,
}

fn blocks(doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for line in doc.lines() {
        let trimmed = line.trim();
        if let Some(block) = current.as_mut() {
            if trimmed == "```" {
                out.extend(current.take());
                continue;
            }
            let code = trimmed.split('#').next().unwrap_or_default();
            let words: Vec<String> = code.split_whitespace().map(str::to_owned).collect();
            if !words.is_empty() {
                block.lines.push(words);
            }
        } else if let Some(info) = trimmed.strip_prefix("```") {
            let mut words = info.split_whitespace();
            if let (Some(kind @ ("assignment" | "user-data")), Some(name)) =
                (words.next(), words.next())
            {
                current = Some(Block {
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                    lines: Vec::new(),
                });
            }
        }
    }
    assert!(current.is_none(), "unterminated block in {DOC}");
    out
}

/// `t0:0,1 t1:2` (already split into words) → flat partitions; `-` → none.
fn tp_list(block: &str, words: &[String]) -> Vec<TopicPartition> {
    if words.len() == 1 && words[0] == "-" {
        return Vec::new();
    }
    words
        .iter()
        .flat_map(|item| {
            let (topic, parts) = item
                .rsplit_once(':')
                .unwrap_or_else(|| panic!("{block}: `{item}` is not topic:p,p"));
            parts.split(',').map(move |p| {
                let p = p
                    .parse::<i32>()
                    .unwrap_or_else(|_| panic!("{block}: bad partition in `{item}`"));
                TopicPartition::new(topic, p)
            })
        })
        .collect()
}

fn grouped(block: &str, words: &[String]) -> Vec<TopicPartitions> {
    group_partitions(&tp_list(block, words))
}

fn hex_bytes(block: &str, words: &[String]) -> Vec<u8> {
    words
        .iter()
        .map(|w| u8::from_str_radix(w, 16).unwrap_or_else(|_| panic!("{block}: bad byte `{w}`")))
        .collect()
}

fn member_mut<'a>(
    block: &str,
    members: &'a mut [MemberSubscription],
    id: &str,
) -> &'a mut MemberSubscription {
    members
        .iter_mut()
        .find(|m| m.member_id == id)
        .unwrap_or_else(|| panic!("{block}: member {id} is used before its `member` line"))
}

fn run_assignment(block: &Block) {
    let name = block.name.as_str();
    let mut assignor = None;
    let mut counts: BTreeMap<String, i32> = BTreeMap::new();
    let mut members: Vec<MemberSubscription> = Vec::new();
    let mut expected: BTreeMap<String, Vec<TopicPartitions>> = BTreeMap::new();
    for words in &block.lines {
        let rest = &words[1..];
        match words[0].as_str() {
            "assignor" => assignor = Some(rest[0].clone()),
            "topic" => {
                counts.insert(rest[0].clone(), rest[1].parse().unwrap());
            }
            "member" => {
                let topics: Vec<&str> = match rest[1].as_str() {
                    "-" => Vec::new(),
                    list => list.split(',').collect(),
                };
                members.push(MemberSubscription::new(rest[0].clone(), topics));
            }
            "instance" => {
                member_mut(name, &mut members, &rest[0]).group_instance_id = Some(rest[1].clone());
            }
            "owned" => {
                member_mut(name, &mut members, &rest[0]).owned_partitions =
                    grouped(name, &rest[1..]);
            }
            "user_data" => {
                member_mut(name, &mut members, &rest[0]).user_data = hex_bytes(name, &rest[1..]);
            }
            "expect" => {
                let previous = expected.insert(rest[0].clone(), grouped(name, &rest[1..]));
                assert!(
                    previous.is_none(),
                    "{name}: two `expect` lines for {}",
                    rest[0]
                );
            }
            other => panic!("{name}: unknown line `{other}`"),
        }
    }
    let assignor = assignor.unwrap_or_else(|| panic!("{name}: no `assignor` line"));
    let assignor = builtin(&assignor).unwrap_or_else(|| panic!("{name}: no assignor {assignor}"));
    let result = assignor.assign(&members, &counts);
    let mut ids: Vec<&String> = members.iter().map(|m| &m.member_id).collect();
    ids.sort();
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        ids,
        "{name}: one `expect` line per member"
    );
    assert_eq!(
        result, expected,
        "{name}: the assignment differs from the doc"
    );
}

fn run_user_data(block: &Block) {
    let name = block.name.as_str();
    let (mut assignor, mut generation, mut partitions, mut bytes) =
        (None, None, Vec::new(), Vec::new());
    for words in &block.lines {
        let rest = &words[1..];
        match words[0].as_str() {
            "assignor" => assignor = Some(rest[0].clone()),
            "generation" => generation = Some(rest[0].parse::<i32>().unwrap()),
            "partitions" => partitions = tp_list(name, rest),
            "hex" => bytes.extend(hex_bytes(name, rest)),
            other => panic!("{name}: unknown line `{other}`"),
        }
    }
    let assignor_name = assignor.unwrap_or_else(|| panic!("{name}: no `assignor` line"));
    let generation = generation.unwrap_or_else(|| panic!("{name}: no `generation` line"));
    let assignor = builtin(&assignor_name).unwrap();
    assert_eq!(
        assignor.user_data(&partitions, generation),
        bytes,
        "{name}: the user data differs from the doc"
    );
    if matches!(assignor_name.as_str(), "sticky" | "cooperative-sticky") {
        let decoded = StickyUserData::decode(&bytes).unwrap_or_else(|| panic!("{name}: decode"));
        assert_eq!(decoded.generation, generation, "{name}");
        let mut sent = if assignor_name == "sticky" {
            partitions
        } else {
            Vec::new()
        };
        sent.sort();
        assert_eq!(decoded.partitions, sent, "{name}");
    }
}

#[test]
fn doc_vectors_match_the_assignors() {
    let doc = std::fs::read_to_string(DOC).expect("read docs/assignors.md");
    let blocks = blocks(&doc);
    let mut covered: BTreeMap<(String, String), usize> = BTreeMap::new();
    for block in &blocks {
        let assignor = block
            .lines
            .iter()
            .find(|w| w[0] == "assignor")
            .map(|w| w[1].clone())
            .unwrap_or_default();
        *covered.entry((block.kind.clone(), assignor)).or_default() += 1;
        match block.kind.as_str() {
            "assignment" => run_assignment(block),
            _ => run_user_data(block),
        }
    }
    // Every built-in assignor has worked assignments and its user data spelled out.
    for assignor in ["range", "roundrobin", "sticky", "cooperative-sticky"] {
        for kind in ["assignment", "user-data"] {
            assert!(
                covered.contains_key(&(kind.to_owned(), assignor.to_owned())),
                "no `{kind}` vector for {assignor} in {DOC}"
            );
        }
    }
}

#[test]
fn names_are_unique() {
    let doc = std::fs::read_to_string(DOC).expect("read docs/assignors.md");
    let mut seen = std::collections::BTreeSet::new();
    for block in blocks(&doc) {
        assert!(
            seen.insert(block.name.clone()),
            "two vectors named {}",
            block.name
        );
    }
}

#[test]
fn parser_reads_both_kinds_and_ignores_other_blocks() {
    let doc = "text\n```text\nexpect x -\n```\n```assignment a\nassignor range # why\n\n\
               member m t\nexpect m t:0,1 u:2\n```\n```user-data b\nhex 01 ff\n```\n";
    let found = blocks(doc);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].kind, "assignment");
    assert_eq!(found[0].lines[0], ["assignor", "range"]);
    assert_eq!(
        tp_list("a", &found[0].lines[2][2..]),
        vec![
            TopicPartition::new("t", 0),
            TopicPartition::new("t", 1),
            TopicPartition::new("u", 2)
        ]
    );
    assert_eq!(hex_bytes("b", &found[1].lines[0][1..]), [1, 255]);
    assert!(tp_list("a", &["-".to_owned()]).is_empty());
}
