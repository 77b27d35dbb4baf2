use super::*;

const TEST_HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// The issue's example, verbatim.
const EXAMPLE: &str = r#"
[[principals]]
name = "orders-service"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # hex SHA-256 of the token
max_groups = 100            # optional quotas, absent = unlimited
max_members = 1000
max_requests_per_s = 5000
max_connections = 50        # client connections open at once, over all of its clients

[[acls]]
principal = "orders-service"   # a principal's name, or "*" for every authenticated principal
resource = "group"             # "group", "topic" or "cluster"
pattern = "orders-*"           # a literal name; a trailing "*" makes it a prefix; "*" alone matches all
operations = ["read", "describe"]
"#;

fn refused(text: &str) -> (usize, String) {
    match AuthFile::parse(text) {
        Err(AuthFileError::At { line, reason, .. }) => (line, reason),
        other => panic!("expected a located error, got {other:?}"),
    }
}

#[test]
fn the_documented_example_parses() {
    let file = AuthFile::parse(EXAMPLE).expect("example");
    assert_eq!(file.principals.len(), 1);
    let p = &file.principals[0];
    assert_eq!(p.name, "orders-service");
    assert_eq!(p.token, TokenHash::from_hex(TEST_HASH));
    assert_eq!(
        (
            p.max_groups,
            p.max_members,
            p.max_requests_per_s,
            p.max_connections
        ),
        (Some(100), Some(1000), Some(5000), Some(50))
    );
    assert_eq!(
        file.principal_for_token("test").map(|p| p.name.as_str()),
        Some("orders-service")
    );
    assert!(file.principal_for_token("nope").is_none());
    let grants = file.grants_for("orders-service");
    assert_eq!(grants.len(), 1);
    assert!(grants[0].allows(ResourceType::Group, "orders-eu", Operation::Read));
    assert!(!grants[0].allows(ResourceType::Group, "billing-eu", Operation::Read));
    assert!(file.grants_for("someone-else").is_empty());
}

#[test]
fn an_empty_file_has_no_principals() {
    let file = AuthFile::parse("").expect("empty");
    assert!(file.principals.is_empty() && file.acls.is_empty());
}

#[test]
fn everyone_acls_apply_to_every_principal() {
    let file = AuthFile::parse(&format!(
        r#"
[[principals]]
name = "a"
token_sha256 = "{TEST_HASH}"
[[principals]]
name = "b"
[[acls]]
principal = "*"
resource = "topic"
pattern = "*"
operations = ["describe"]
"#
    ))
    .expect("file");
    assert_eq!(file.grants_for("a").len(), 1);
    assert_eq!(file.grants_for("b").len(), 1);
    assert_eq!(file.principal("b").and_then(|p| p.token), None);
}

#[test]
fn errors_name_the_line_and_the_reason() {
    let cases: &[(&str, usize, &str)] = &[
        // TOML syntax.
        ("[[principals]]\nname = \"a\"\ntoken_sha256 = \n", 3, ""),
        // Unknown key (a typo must not silently drop a quota).
        ("[[principals]]\nname = \"a\"\nmax_group = 3\n", 3, "max_group"),
        ("[[principals]]\nname = \"\"\n", 2, "empty"),
        ("[[principals]]\nname = \"*\"\n", 2, "every principal"),
        ("[[principals]]\nname = \"a\"\ntoken_sha256 = \"abc\"\n", 3, "64 hex digits"),
        ("[[principals]]\nname = \"a\"\nmax_members = -1\n", 3, "max_members"),
        ("[[principals]]\nname = \"a\"\nmax_requests_per_s = 0\n", 3, "max_requests_per_s"),
        ("[[principals]]\nname = \"a\"\nmax_connections = 0\n", 3, "max_connections"),
        (
            "[[acls]]\nprincipal = \"ghost\"\nresource = \"group\"\npattern = \"*\"\noperations = [\"read\"]\n",
            2,
            "ghost",
        ),
        (
            "[[acls]]\nprincipal = \"*\"\nresource = \"queue\"\npattern = \"*\"\noperations = [\"read\"]\n",
            3,
            "unknown resource",
        ),
        (
            "[[acls]]\nprincipal = \"*\"\nresource = \"group\"\npattern = \"a*b\"\noperations = [\"read\"]\n",
            4,
            "only allowed at the end",
        ),
        (
            "[[acls]]\nprincipal = \"*\"\nresource = \"group\"\npattern = \"\"\noperations = [\"read\"]\n",
            4,
            "empty",
        ),
        (
            "[[acls]]\nprincipal = \"*\"\nresource = \"cluster\"\npattern = \"prod\"\noperations = [\"admin\"]\n",
            4,
            "cluster",
        ),
        (
            "[[acls]]\nprincipal = \"*\"\nresource = \"group\"\npattern = \"*\"\noperations = [\"read\", \"create\"]\n",
            5,
            "not an operation on a group (expected read, describe, delete)",
        ),
        (
            "[[acls]]\nprincipal = \"*\"\nresource = \"topic\"\npattern = \"*\"\noperations = []\n",
            5,
            "at least one operation",
        ),
    ];
    for (text, line, reason) in cases {
        let (got_line, got_reason) = refused(text);
        assert_eq!(got_line, *line, "{text:?}: {got_reason}");
        assert!(got_reason.contains(reason), "{text:?}: {got_reason}");
    }
}

#[test]
fn duplicate_names_and_shared_tokens_are_refused() {
    let twice = "[[principals]]\nname = \"a\"\n[[principals]]\nname = \"a\"\n";
    assert!(AuthFile::parse(twice)
        .expect_err("twice")
        .to_string()
        .contains("declared twice"));
    let shared = format!(
        "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{TEST_HASH}\"\n\
         [[principals]]\nname = \"b\"\ntoken_sha256 = \"{}\"\n",
        TEST_HASH.to_uppercase()
    );
    assert!(AuthFile::parse(&shared)
        .expect_err("shared")
        .to_string()
        .contains("same token_sha256"));
}

#[test]
fn a_missing_file_says_which() {
    let e = AuthFile::load(Path::new("/nonexistent/muster-auth.toml")).expect_err("missing");
    assert!(
        e.to_string().contains("/nonexistent/muster-auth.toml"),
        "{e}"
    );
}

#[test]
fn patterns_ending_in_a_multibyte_character_are_fine() {
    // Group ids may be any UTF-8 without control characters; a pattern is checked by
    // characters, never sliced by bytes (a panic here would abort musterd on SIGHUP).
    for pattern in ["café", "café*", "ü", "*"] {
        let file = AuthFile::parse(&format!(
            "[[acls]]\nprincipal = \"*\"\nresource = \"group\"\npattern = \"{pattern}\"\noperations = [\"read\"]\n"
        ))
        .expect(pattern);
        assert_eq!(file.acls.len(), 1);
    }
    let (line, reason) = refused(
        "[[acls]]\nprincipal = \"*\"\nresource = \"group\"\npattern = \"a*é\"\noperations = [\"read\"]\n",
    );
    assert_eq!(line, 4);
    assert!(reason.contains("only allowed at the end"), "{reason}");
}
