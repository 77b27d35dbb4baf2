//! The machinery behind the settings table in [`super`]: the `settings!` macro, which turns
//! one row per setting into everything else, and the plain functions its expansion calls.
//!
//! A row reads
//!
//! ```text
//! /// Help text, one paragraph (its final period is dropped, as clap's derive does).
//! name: Type = "default", range(LO ..= HI), check(function);
//! ```
//!
//! - `name` is the struct field and the TOML key; the flag is `--name-with-dashes`, the
//!   environment variable `MUSTER_NAME_IN_CAPS`, the value name `NAME_IN_CAPS`.
//! - `Type` is parsed by clap's `value_parser!` from flags and environment, and by serde from
//!   the file.
//! - The default is the text clap parses, exactly as `--help` shows it, so a default goes
//!   through the same parser as a user's value.
//! - `range(LO ..= HI)` (optional): a bound is a literal, or the name of another setting (a
//!   range that depends on another value; an upper bound taken from another setting is raised
//!   to the lower bound so the message never shows an empty range). `--help` shows the range
//!   after the help text, from the same tokens `validate` checks.
//! - `check(function)` (optional): `fn(setting: &str, value: &Type) -> Result<(),
//!   ConfigError>`, for what a range cannot say (an address, a log filter).
//!
//! The expansion defines `Settings` (the fields plus `config`), the file's `FileSettings`,
//! [`super::SETTINGS`] (every name, in table order), and private methods `Settings::args`
//! (the clap arguments), `from_matches`, `layer_file` (file under flags and environment) and
//! `check_each` (ranges and checks, in table order). Everything else is ordinary code in
//! `config.rs`.

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches};

use super::ConfigError;

macro_rules! settings {
    // A range bound: a literal as it is, or the value of another setting.
    (@bound $s:ident, $b:literal) => { $b };
    (@bound $s:ident, $b:ident) => { $s.$b };
    // An upper bound from another setting is never below the lower bound.
    (@upper $s:ident, $lo:tt, $hi:literal) => { $hi };
    (@upper $s:ident, $lo:tt, $hi:ident) => { $s.$hi.max(settings!(@bound $s, $lo)) };
    // How `--help` shows a bound: a number, or the other setting's flag name.
    (@show $ty:ty, $b:literal) => {{
        let bound: $ty = $b;
        bound.to_string()
    }};
    (@show $ty:ty, $b:ident) => { $crate::config::table::flag(stringify!($b)) };

    ($(
        $(#[doc = $doc:literal])+
        $field:ident : $ty:ty = $default:literal
        $(, range($lo:tt ..= $hi:tt))?
        $(, check($check:path))?
        ;
    )*) => {
        /// `musterd`'s settings, once flags, environment, file and defaults are merged (see
        /// the table in this module's source for what each one means).
        #[derive(Debug, Clone)]
        pub struct Settings {
            /// The TOML file the settings were read from, if any.
            pub config: Option<std::path::PathBuf>,
            $(
                $(#[doc = $doc])+
                pub $field: $ty,
            )*
        }

        /// The TOML file: every setting optional, unknown keys refused (a typo must not pass
        /// silently).
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct FileSettings {
            $($field: Option<$ty>,)*
        }

        /// Every setting's name (field and TOML key), in table order; `config` is not one.
        pub const SETTINGS: &[&str] = &[$(stringify!($field)),*];

        impl Settings {
            /// The clap argument of every setting in the table.
            fn args() -> Vec<clap::Arg> {
                vec![$(
                    $crate::config::table::arg(
                        stringify!($field),
                        &[$($doc),+],
                        $default,
                        None $(.or(Some((
                            settings!(@show $ty, $lo),
                            settings!(@show $ty, $hi),
                        ))))?,
                    )
                    .value_parser(clap::value_parser!($ty)),
                )*]
            }

            /// Flags, environment and defaults, as clap merged them.
            fn from_matches(matches: &clap::ArgMatches) -> Result<Settings, ConfigError> {
                Ok(Settings {
                    config: matches.get_one::<std::path::PathBuf>(CONFIG).cloned(),
                    $($field: $crate::config::table::value(matches, stringify!($field))?,)*
                })
            }

            /// Takes each setting from the file unless a flag or the environment gave it.
            fn layer_file(&mut self, file: FileSettings, matches: &clap::ArgMatches) {
                $(
                    if let Some(value) = file.$field {
                        if $crate::config::table::defaulted(matches, stringify!($field)) {
                            self.$field = value;
                        }
                    }
                )*
            }

            /// Every range and check of the table, in table order; the first failure wins.
            fn check_each(&self) -> Result<(), ConfigError> {
                let s = self;
                $(
                    $(
                        $crate::config::table::within(
                            stringify!($field),
                            s.$field,
                            settings!(@bound s, $lo),
                            settings!(@upper s, $lo, $hi),
                        )?;
                    )?
                    $($check(stringify!($field), &s.$field)?;)?
                )*
                Ok(())
            }
        }
    };
}
pub(crate) use settings;

/// A setting's flag name: its field name with `-` for `_`.
pub(crate) fn flag(name: &str) -> String {
    name.replace('_', "-")
}

/// The clap argument for the setting `name` (its value parser is added by the macro, which
/// knows the type).
pub(crate) fn arg(
    name: &'static str,
    doc: &[&str],
    default: &'static str,
    range: Option<(String, String)>,
) -> Arg {
    // clap's derive: lines of one paragraph joined by a space, the final period dropped.
    let mut help = doc.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    if help.ends_with('.') && !help.ends_with("..") {
        help.pop();
    }
    if let Some((lo, hi)) = range {
        help = format!("{help} [{lo}..={hi}]");
    }
    Arg::new(name)
        .long(flag(name))
        .env(format!("MUSTER_{}", name.to_uppercase()))
        .value_name(name.to_uppercase())
        .action(ArgAction::Set)
        .default_value(default)
        .help(help)
}

/// The value clap settled on for `name` (every setting has a default, so there is one).
pub(crate) fn value<T: Clone + Send + Sync + 'static>(
    matches: &ArgMatches,
    name: &str,
) -> Result<T, ConfigError> {
    matches
        .try_get_one::<T>(name)
        .ok()
        .flatten()
        .cloned()
        .ok_or_else(|| ConfigError::Missing(flag(name)))
}

/// Whether `name` came from its default (so the file may set it).
pub(crate) fn defaulted(matches: &ArgMatches, name: &str) -> bool {
    matches
        .value_source(name)
        .is_none_or(|s| s == ValueSource::DefaultValue)
}

/// A range check; the message names the setting's flag, the value and the range.
pub(crate) fn within<T: PartialOrd + std::fmt::Display + Copy>(
    name: &str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(ConfigError::Invalid {
            setting: flag(name),
            value: value.to_string(),
            allowed: format!("allowed range is {min}..={max}"),
        });
    }
    Ok(())
}
