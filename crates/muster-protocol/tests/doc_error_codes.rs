//! The error-code table of `docs/protocol.md` §4 lists exactly the codes of [`ErrorCode`]: the
//! same numbers with the same names, each once. Client authors copy that table, so it must not
//! drift from the one in `src/error.rs`.

use std::collections::BTreeMap;

use muster_protocol::ErrorCode;

/// `(code, NAME)` of every row of §4's table: rows whose first cell is a number and whose
/// second is a name in backticks.
fn doc_rows(doc: &str) -> Vec<(i16, String)> {
    let section = doc
        .split("\n## 4. Error codes")
        .nth(1)
        .and_then(|rest| rest.split("\n## 5.").next())
        .expect("docs/protocol.md has a section 4 followed by a section 5");
    section
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix('|')?.split('|').map(str::trim);
            let code = cells.next()?.parse::<i16>().ok()?;
            let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((code, name.to_owned()))
        })
        .collect()
}

#[test]
fn doc_table_lists_every_code_once() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.md");
    let doc = std::fs::read_to_string(path).expect("read docs/protocol.md");
    let rows = doc_rows(&doc);
    let mut by_code = BTreeMap::new();
    for (code, name) in &rows {
        assert!(
            by_code.insert(*code, name.as_str()).is_none(),
            "code {code} is listed twice in §4"
        );
    }
    let expected: BTreeMap<i16, &str> = ErrorCode::ALL
        .iter()
        .map(|c| (c.code(), c.name()))
        .collect();
    assert_eq!(by_code, expected, "§4 of docs/protocol.md vs ErrorCode");
}

#[test]
fn row_parser_reads_a_row_and_skips_the_rest() {
    let doc = "\n## 4. Error codes\n\n| code | name |\n|---:|---|\n| 27 | `REBALANCE_IN_PROGRESS` | x |\n\
               | -1 | `UNKNOWN_SERVER_ERROR` | y |\nNotes: | 3 | `NOT_A_ROW` |\n\n## 5. Next\n| 9 | `LATER` |\n";
    assert_eq!(
        doc_rows(doc),
        vec![
            (27, "REBALANCE_IN_PROGRESS".to_owned()),
            (-1, "UNKNOWN_SERVER_ERROR".to_owned())
        ]
    );
}
