//! Client-supplied strings in log lines. Group, member, client and instance ids, topic names,
//! reasons and hosts come from the wire and may be up to a frame (1 MiB) long or hold control
//! characters; logged as they are, one request could write a megabyte per log line or forge
//! lines of its own (log injection). Every log call site that prints such a string prints it
//! through [`logsafe`] (or [`logsafe_list`] for a list of them): at most [`LOG_STR_MAX`] bytes,
//! cut on a char boundary and marked with how much was left out, control characters escaped.
//!
//! Both are lazy `Display`/`Debug` wrappers: nothing is copied or allocated unless the line is
//! actually written.

use std::fmt::{self, Write as _};

/// Most bytes of one client-supplied string a log line shows.
pub const LOG_STR_MAX: usize = 128;

/// Most items of a client-supplied list a log line shows.
pub const LOG_LIST_MAX: usize = 16;

/// A client-supplied string, bounded and escaped for a log line: `group_id = %logsafe(id)`.
pub fn logsafe(s: &str) -> LogSafe<'_> {
    LogSafe(s)
}

/// A list of client-supplied strings (member ids, topics), each bounded by [`logsafe`], at
/// most [`LOG_LIST_MAX`] of them shown: `members = %logsafe_list(&ids)`.
pub fn logsafe_list<S: AsRef<str>>(items: &[S]) -> LogSafeList<'_, S> {
    LogSafeList(items)
}

/// See [`logsafe`].
#[derive(Clone, Copy)]
pub struct LogSafe<'a>(&'a str);

impl fmt::Display for LogSafe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let mut cut = s.len().min(LOG_STR_MAX);
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        let (shown, rest) = s.split_at(cut);
        for c in shown.chars() {
            if c.is_control() {
                // \n, \t, \u{1b} and the like: visible, never a line break or an escape
                // sequence of the reader's terminal.
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        if !rest.is_empty() {
            write!(f, "…(+{} bytes)", rest.len())?;
        }
        Ok(())
    }
}

impl fmt::Debug for LogSafe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// See [`logsafe_list`].
pub struct LogSafeList<'a, S>(&'a [S]);

impl<S: AsRef<str>> fmt::Display for LogSafeList<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, item) in self.0.iter().take(LOG_LIST_MAX).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{:?}", logsafe(item.as_ref()))?;
        }
        if self.0.len() > LOG_LIST_MAX {
            write!(f, ", …(+{} more)", self.0.len() - LOG_LIST_MAX)?;
        }
        f.write_str("]")
    }
}

impl<S: AsRef<str>> fmt::Debug for LogSafeList<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_plain_strings_are_unchanged() {
        assert_eq!(logsafe("orders-consumers").to_string(), "orders-consumers");
        assert_eq!(format!("{:?}", logsafe("g")), "\"g\"");
    }

    #[test]
    fn long_strings_are_cut_on_a_char_boundary_and_say_how_much_is_missing() {
        let long = "x".repeat(1 << 20);
        let shown = logsafe(&long).to_string();
        assert_eq!(
            shown,
            format!(
                "{}…(+{} bytes)",
                "x".repeat(LOG_STR_MAX),
                (1 << 20) - LOG_STR_MAX
            )
        );
        // 'é' is two bytes: 127 ASCII bytes then 'é' straddles the limit and is left out.
        let straddling = format!("{}é", "a".repeat(LOG_STR_MAX - 1));
        assert_eq!(
            logsafe(&straddling).to_string(),
            format!("{}…(+2 bytes)", "a".repeat(LOG_STR_MAX - 1))
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        let forged = "g\n2026-01-01T00:00:00Z ERROR forged\r\u{1b}[31m\t";
        let shown = logsafe(forged).to_string();
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(
            shown,
            "g\\n2026-01-01T00:00:00Z ERROR forged\\r\\u{1b}[31m\\t"
        );
    }

    #[test]
    fn lists_are_bounded_in_items_and_in_each_item() {
        let ids: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
        let shown = logsafe_list(&ids).to_string();
        assert!(shown.starts_with("[\"m0\", \"m1\""), "{shown}");
        assert!(shown.ends_with("\"m15\", …(+4 more)]"), "{shown}");
        let long = vec!["y".repeat(1000)];
        assert_eq!(
            logsafe_list(&long).to_string(),
            format!(
                "[\"{}…(+{} bytes)\"]",
                "y".repeat(LOG_STR_MAX),
                1000 - LOG_STR_MAX
            )
        );
    }
}
