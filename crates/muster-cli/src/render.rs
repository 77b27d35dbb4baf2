//! Output: every command returns a [`Report`], which is printed either for people (aligned
//! columns, no borders, in the style of `kafka-consumer-groups.sh`) or as one pretty-printed
//! JSON document (`--json`: the report's `serde` form, whose field names are stable). The
//! cells several reports share (durations, absent values, partition lists) are made here.
//!
//! Reports go to stdout; notes for people ("no groups") go to stderr so that stdout stays
//! empty when there is nothing to list. A reader that closed the pipe early (`| head`) is not
//! an error.

use std::io::{self, Write};

use comfy_table::{presets, Table};
use muster_client::protocol::view::AssignedPartitions;
use serde::Serialize;

use crate::exit::Failure;

/// How to print a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
}

/// What a command prints.
pub trait Report: Serialize {
    /// The human-readable form: a table or a sentence, without the final newline.
    /// An empty string prints nothing.
    fn human(&self) -> String;

    /// A remark for stderr in human form only, e.g. that a list is empty.
    fn note(&self) -> Option<String> {
        None
    }
}

/// Prints `report` on stdout in `format` (and its note, if any, on stderr).
pub fn emit<R: Report>(report: &R, format: Format) -> Result<(), Failure> {
    let mut text = match format {
        Format::Json => serde_json::to_string_pretty(report)
            .map_err(|e| Failure::internal(format!("cannot encode the JSON output: {e}")))?,
        Format::Human => {
            if let Some(note) = report.note() {
                // Nothing useful to do if stderr is gone.
                let _ = writeln!(io::stderr().lock(), "muster: {note}");
            }
            report.human()
        }
    };
    if text.is_empty() {
        return Ok(());
    }
    text.push('\n');
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::internal(format!("cannot write the output: {e}"))),
    }
}

/// Rows under a header (none if `header` is empty), in aligned columns two spaces apart; no
/// borders, no trailing spaces.
pub fn table<R, C>(header: &[&str], rows: R) -> String
where
    R: IntoIterator<Item = C>,
    C: IntoIterator<Item = String>,
{
    let mut table = Table::new();
    table.load_style(presets::NOTHING);
    if !header.is_empty() {
        table.set_header(header.iter().copied());
    }
    for row in rows {
        table.add_row(row.into_iter().collect::<Vec<String>>());
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    table.trim_fmt()
}

/// `KEY  value` lines, aligned (the head of a description).
pub fn fields(pairs: &[(&str, String)]) -> String {
    table(
        &[],
        pairs
            .iter()
            .map(|(key, value)| [(*key).to_owned(), value.clone()]),
    )
}

/// `orders:0,1,2 audit:4`, or `-` for nothing.
pub fn assignment_cell(assignment: &[AssignedPartitions]) -> String {
    let cells: Vec<String> = assignment
        .iter()
        .filter(|a| !a.partitions.is_empty())
        .map(|a| {
            let partitions: Vec<String> = a.partitions.iter().map(i32::to_string).collect();
            format!("{}:{}", a.topic, partitions.join(","))
        })
        .collect();
    if cells.is_empty() {
        "-".to_owned()
    } else {
        cells.join(" ")
    }
}

/// A value that may be absent, for a table cell.
pub fn or_dash(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => v.to_owned(),
        _ => "-".to_owned(),
    }
}

/// A time in milliseconds since the Unix epoch as RFC 3339 in UTC, to the millisecond:
/// `2026-12-01T14:00:00.000Z` (what `offsets reset --to-time` reads back exactly).
pub fn time_ms(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        ),
        // Past year 9999: not a time a server stamps; shown raw rather than hidden.
        Err(_) => format!("{ms}ms"),
    }
}

/// An RFC 3339 time (`2026-12-01T14:00:00Z`, `2026-12-01T15:00:00.250+01:00`) as milliseconds
/// since the Unix epoch; anything finer than a millisecond is dropped.
pub fn parse_time_ms(value: &str) -> Result<u64, String> {
    let parsed =
        time::OffsetDateTime::parse(value.trim(), &time::format_description::well_known::Rfc3339)
            .map_err(|e| {
            format!("{value:?} is not an RFC 3339 time such as 2026-12-01T14:00:00Z: {e}")
        })?;
    let ms = parsed.unix_timestamp_nanos().div_euclid(1_000_000);
    u64::try_from(ms).map_err(|_| format!("{value:?} is before 1970"))
}

/// A duration in milliseconds, short and exact enough to read: `250ms`, `6s`, `1.5s`,
/// `2m30s`.
pub fn millis(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 if ms.is_multiple_of(1_000) => format!("{}s", ms / 1_000),
        1_000..=59_999 => format!("{}.{}s", ms / 1_000, (ms % 1_000) / 100),
        _ => {
            let (minutes, seconds) = (ms / 60_000, (ms % 60_000) / 1_000);
            if seconds == 0 {
                format!("{minutes}m")
            } else {
                format!("{minutes}m{seconds}s")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_without_borders_or_trailing_spaces() {
        let out = table(
            &["GROUP", "STATE", "MEMBERS"],
            [
                vec!["billing".to_owned(), "Stable".to_owned(), "2".to_owned()],
                vec!["a".to_owned(), "Empty".to_owned(), "0".to_owned()],
            ],
        );
        assert_eq!(
            out,
            "GROUP    STATE   MEMBERS\n\
             billing  Stable  2\n\
             a        Empty   0"
        );
    }

    #[test]
    fn fields_align() {
        let out = fields(&[("STATE", "Stable".to_owned()), ("GENERATION", "3".into())]);
        assert_eq!(out, "STATE       Stable\nGENERATION  3");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(millis(0), "0ms");
        assert_eq!(millis(250), "250ms");
        assert_eq!(millis(6_000), "6s");
        assert_eq!(millis(1_550), "1.5s");
        assert_eq!(millis(60_000), "1m");
        assert_eq!(millis(150_000), "2m30s");
    }

    #[test]
    fn assignments_read_compactly() {
        let assignment = vec![
            AssignedPartitions {
                topic: "orders".into(),
                partitions: vec![0, 1],
            },
            AssignedPartitions {
                topic: "audit".into(),
                partitions: vec![4],
            },
        ];
        assert_eq!(assignment_cell(&assignment), "orders:0,1 audit:4");
        assert_eq!(assignment_cell(&[]), "-");
    }

    #[test]
    fn times_print_as_rfc3339_utc_and_read_back_exactly() {
        assert_eq!(time_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(time_ms(1_796_133_600_123), "2026-12-01T14:00:00.123Z");
        for ms in [0, 1, 999, 951_782_400_000, 1_796_133_600_123] {
            assert_eq!(parse_time_ms(&time_ms(ms)), Ok(ms));
        }
        assert_eq!(parse_time_ms("2026-12-01T14:00:00Z"), Ok(1_796_133_600_000));
        assert_eq!(
            parse_time_ms("2026-12-01T15:00:00.5+01:00"),
            Ok(1_796_133_600_500)
        );
        assert!(parse_time_ms("2026-12-01 14:00").is_err());
        assert!(parse_time_ms("1969-12-31T23:59:59Z").is_err());
    }

    #[test]
    fn absent_values_are_dashes() {
        assert_eq!(or_dash(None), "-");
        assert_eq!(or_dash(Some("")), "-");
        assert_eq!(or_dash(Some("x")), "x");
    }
}
