//! The engine is pure (module docs of `engine/mod.rs`): no engine file, the consumer protocol's
//! included (its tests are not the engine), may reach for a runtime, a shared counter or the
//! metrics. Read from the sources, so that a `use` slipping in fails
//! here rather than in a review.

use std::path::Path;

/// What no engine file may name, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("actix", "actors are the shell's"),
    ("tokio", "the engine does no I/O and awaits nothing"),
    (
        "std::sync::atomic",
        "shared counters are the shell's ledger (actors/ledger.rs)",
    ),
    (
        "Atomic",
        "shared counters are the shell's ledger (actors/ledger.rs)",
    ),
    ("Mutex", "the engine shares nothing"),
    (
        "crate::metrics",
        "metrics come from the effects' events, in the shell",
    ),
    (
        "metrics::",
        "metrics come from the effects' events, in the shell",
    ),
    (
        "crate::quota",
        "quota units are counted by the shell's ledger",
    ),
    ("crate::actors", "the engine knows nothing of its shell"),
    ("Instant::now", "the engine is handed `now`"),
    ("SystemTime", "the engine is handed `now`"),
];

#[test]
fn no_engine_file_imports_a_runtime_a_counter_or_metrics() {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine")];
    let mut checked = 0;
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("an engine directory is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                // Tests drive the engine as its shell does (the real ledger): not the engine.
                if path.file_name().is_none_or(|n| n != "tests") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("an engine file is readable");
            checked += 1;
            for (line_no, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                for (word, why) in FORBIDDEN {
                    if code.contains(word) {
                        found.push(format!(
                            "{}:{}: `{word}` ({why})",
                            path.display(),
                            line_no + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(checked >= 15, "only {checked} engine files found");
    assert!(
        found.is_empty(),
        "the engine must stay pure:\n{}",
        found.join("\n")
    );
}
