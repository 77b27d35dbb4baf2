//! The auth files in docs/security.md are valid and mean what the text says: every ```toml
//! block there is an auth file (a test reads the very text, so the docs cannot drift from the
//! parser), the walkthrough's principals get what it promises, and the documented error for a
//! bad operation is the one the parser gives.

use muster_auth::{AuthFile, AuthFileError, Operation, ResourceType};

fn security_md() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/security.md"
    ))
    .expect("docs/security.md")
}

/// Every ```toml block of the page.
fn toml_blocks(doc: &str) -> Vec<&str> {
    doc.split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default())
        .collect()
}

fn allows(
    file: &AuthFile,
    principal: &str,
    resource: ResourceType,
    name: &str,
    op: Operation,
) -> bool {
    let grants = file.grants_for(principal);
    grants
        .iter()
        .any(|g| g.is_cluster_admin() || g.allows(resource, name, op))
}

#[test]
fn every_auth_file_in_the_security_docs_is_valid() {
    let doc = security_md();
    let blocks = toml_blocks(&doc);
    assert!(
        !blocks.is_empty(),
        "docs/security.md has an example auth file"
    );
    for block in blocks {
        if let Err(e) = AuthFile::parse(block) {
            panic!("docs/security.md: {e}\n{block}");
        }
    }
}

#[test]
fn the_walkthrough_file_grants_what_the_text_says() {
    use Operation::*;
    use ResourceType::*;
    let doc = security_md();
    let file = AuthFile::parse(toml_blocks(&doc)[0]).expect("the walkthrough's file");
    let names: Vec<&str> = file.principals.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["orders-service", "monitoring", "ops"]);

    // orders-service: its own groups and topics, nothing of billing's.
    let orders = |r, name, op| allows(&file, "orders-service", r, name, op);
    assert!(orders(Group, "orders-workers", Read));
    assert!(
        orders(Group, "orders-workers", Describe),
        "read implies describe"
    );
    assert!(!orders(Group, "orders-workers", Delete));
    assert!(orders(Topic, "orders-placed", Read));
    assert!(orders(Topic, "orders-placed", Create));
    assert!(
        orders(Topic, "orders-placed", Describe),
        "create and read imply describe"
    );
    for op in [Read, Describe, Delete] {
        assert!(!orders(Group, "billing-workers", op), "{op}");
    }
    for op in [Read, Describe, Create] {
        assert!(!orders(Topic, "billing-invoices", op), "{op}");
    }
    let quota = file.principal("orders-service").expect("orders-service");
    assert_eq!(
        (
            quota.max_groups,
            quota.max_members,
            quota.max_requests_per_s
        ),
        (Some(20), Some(200), Some(2000))
    );

    // monitoring: describe everything, change nothing.
    let monitoring = |r, name, op| allows(&file, "monitoring", r, name, op);
    assert!(monitoring(Group, "billing-workers", Describe));
    assert!(monitoring(Topic, "orders-placed", Describe));
    assert!(!monitoring(Group, "orders-workers", Read));
    assert!(!monitoring(Group, "orders-workers", Delete));
    assert!(!monitoring(Topic, "orders-placed", Create));

    // ops: everything.
    assert!(file.grants_for("ops").iter().any(|g| g.is_cluster_admin()));
    assert!(allows(&file, "ops", Group, "billing-workers", Delete));
}

#[test]
fn the_documented_error_is_the_parsers() {
    let doc = security_md();
    let file = toml_blocks(&doc)[0];
    let broken = file.replacen(
        r#"operations = ["read"]"#,
        r#"operations = ["read", "write"]"#,
        1,
    );
    assert_ne!(broken, file);
    let e = AuthFile::parse(&broken).expect_err("write is no operation");
    assert!(matches!(e, AuthFileError::At { .. }), "{e:?}");
    let documented = format!("auth file /etc/muster/auth.toml: {e}");
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&documented),
        "docs/security.md should quote: {documented}"
    );
}
