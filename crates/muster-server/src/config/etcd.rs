//! The settings that secure cluster mode's connection to etcd (`--etcd-ca`, `--etcd-cert`,
//! `--etcd-key`, `--etcd-user`, `--etcd-password-file`, and `MUSTER_ETCD_PASSWORD`): how
//! they must go together ([`Settings::validate_etcd`], with the other settings), and the files
//! and password they name, read and checked at startup ([`Settings::etcd_security`]). The
//! password is read from a file or the environment only, never a flag (it would show in `ps`),
//! and is in no message.

use std::path::Path;

use muster_etcd::{EtcdCredentials, EtcdSecurity, EtcdTls};

use super::{set, table, ConfigError, Settings};

/// The environment variable that may hold the etcd user's password (instead of a file).
pub const ETCD_PASSWORD_ENV: &str = "MUSTER_ETCD_PASSWORD";

fn invalid(setting: &str, value: &str, allowed: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        setting: table::flag(setting),
        value: value.to_owned(),
        allowed: allowed.into(),
    }
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

impl Settings {
    pub fn etcd_ca(&self) -> Option<&Path> {
        set(&self.etcd_ca)
    }

    pub fn etcd_cert(&self) -> Option<&Path> {
        set(&self.etcd_cert)
    }

    pub fn etcd_key(&self) -> Option<&Path> {
        set(&self.etcd_key)
    }

    pub fn etcd_password_file(&self) -> Option<&Path> {
        set(&self.etcd_password_file)
    }

    /// The etcd settings that only make sense together (no file is read here).
    pub(super) fn validate_etcd(&self) -> Result<(), ConfigError> {
        let endpoints = self.etcd_endpoints();
        let given: [(&str, Option<&Path>); 4] = [
            ("etcd_ca", self.etcd_ca()),
            ("etcd_cert", self.etcd_cert()),
            ("etcd_key", self.etcd_key()),
            ("etcd_password_file", self.etcd_password_file()),
        ];
        if endpoints.is_empty() {
            if let Some((name, Some(path))) = given.iter().find(|(_, p)| p.is_some()) {
                return Err(invalid(
                    name,
                    &shown(path),
                    "etcd settings are for cluster mode: give --cluster-etcd too",
                ));
            }
            if !self.etcd_user.is_empty() {
                return Err(invalid(
                    "etcd_user",
                    &self.etcd_user,
                    "etcd settings are for cluster mode: give --cluster-etcd too",
                ));
            }
            return Ok(());
        }
        match (self.etcd_cert(), self.etcd_key()) {
            (Some(_), None) => {
                return Err(invalid("etcd_key", "", "--etcd-cert needs --etcd-key"));
            }
            (None, Some(key)) => {
                return Err(invalid(
                    "etcd_cert",
                    "",
                    format!("--etcd-key {} needs --etcd-cert", key.display()),
                ));
            }
            _ => {}
        }
        match self.etcd_ca() {
            Some(ca) => {
                if let Some(plain) = endpoints.iter().find(|e| e.starts_with("http://")) {
                    return Err(invalid(
                        "etcd_ca",
                        &shown(ca),
                        format!(
                            "a CA means TLS to etcd, and --cluster-etcd has the plain endpoint \
                             {plain}: use https:// (or drop --etcd-ca)"
                        ),
                    ));
                }
            }
            None => {
                if let Some(tls) = endpoints.iter().find(|e| e.starts_with("https://")) {
                    return Err(invalid(
                        "cluster_etcd",
                        &self.cluster_etcd,
                        format!(
                            "{tls} is https://: give --etcd-ca, the CA that signed etcd's \
                             server certificates"
                        ),
                    ));
                }
                if let Some(cert) = self.etcd_cert() {
                    return Err(invalid(
                        "etcd_cert",
                        &shown(cert),
                        "a client certificate needs TLS: give --etcd-ca and https:// endpoints",
                    ));
                }
            }
        }
        if let (Some(file), true) = (self.etcd_password_file(), self.etcd_user.is_empty()) {
            return Err(invalid(
                "etcd_password_file",
                &shown(file),
                "a password needs --etcd-user",
            ));
        }
        Ok(())
    }

    /// TLS files and credentials for etcd, read and checked: a file that cannot be read or
    /// used, a user without a password, or a password without a user stops startup.
    /// `env_password` is [`ETCD_PASSWORD_ENV`]'s value, if set.
    pub fn etcd_security(&self, env_password: Option<String>) -> Result<EtcdSecurity, ConfigError> {
        let tls = match self.etcd_ca() {
            None => None,
            Some(ca) => {
                let client = self.etcd_cert().zip(self.etcd_key());
                let loaded = EtcdTls::load(ca, client).map_err(|e| {
                    // Name the setting whose file is at fault.
                    let setting = match client {
                        Some((_, key)) if e.to_string().contains(&shown(key)) => {
                            ("etcd_key", shown(key))
                        }
                        Some((cert, _)) if e.to_string().contains(&shown(cert)) => {
                            ("etcd_cert", shown(cert))
                        }
                        _ => ("etcd_ca", shown(ca)),
                    };
                    invalid(setting.0, &setting.1, e.to_string())
                })?;
                Some(loaded)
            }
        };
        let user = self.etcd_user.as_str();
        let credentials = match (user.is_empty(), self.etcd_password_file(), env_password) {
            (true, None, None) => None,
            (true, _, Some(_)) => {
                return Err(invalid(
                    "etcd_user",
                    "",
                    format!("{ETCD_PASSWORD_ENV} is set: give the etcd user it is the password of"),
                ))
            }
            (true, Some(file), None) => {
                return Err(invalid(
                    "etcd_password_file",
                    &shown(file),
                    "a password needs --etcd-user",
                ))
            }
            (false, Some(file), Some(_)) => {
                return Err(invalid(
                    "etcd_password_file",
                    &shown(file),
                    format!("{ETCD_PASSWORD_ENV} is set too: give the password one way only"),
                ))
            }
            (false, None, None) => {
                return Err(invalid(
                    "etcd_user",
                    user,
                    format!("give its password with --etcd-password-file or {ETCD_PASSWORD_ENV}"),
                ))
            }
            (false, Some(file), None) => Some(
                EtcdCredentials::from_password_file(user, file)
                    .map_err(|e| invalid("etcd_password_file", &shown(file), e.to_string()))?,
            ),
            (false, None, Some(password)) => Some(
                EtcdCredentials::new(user, password, ETCD_PASSWORD_ENV)
                    .map_err(|e| invalid("etcd_user", user, e.to_string()))?,
            ),
        };
        Ok(EtcdSecurity { tls, credentials })
    }

    /// [`ETCD_PASSWORD_ENV`] from the process environment.
    pub fn etcd_password_from_env() -> Result<Option<String>, ConfigError> {
        match std::env::var(ETCD_PASSWORD_ENV) {
            Ok(password) => Ok(Some(password)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(invalid(
                "etcd_user",
                "",
                format!("{ETCD_PASSWORD_ENV} is not UTF-8 text"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(args: &[&str]) -> Result<Settings, ConfigError> {
        Settings::load(std::iter::once("musterd").chain(args.iter().copied()))
    }

    #[test]
    fn etcd_settings_must_go_together() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--etcd-ca", "/ca.pem"],
                "etcd settings are for cluster mode",
            ),
            (
                &[
                    "--cluster-etcd",
                    "http://127.0.0.1:2379",
                    "--etcd-ca",
                    "/ca.pem",
                ],
                "has the plain endpoint http://127.0.0.1:2379: use https://",
            ),
            (
                &["--cluster-etcd", "https://127.0.0.1:2379"],
                "give --etcd-ca",
            ),
            (
                &[
                    "--cluster-etcd",
                    "https://127.0.0.1:2379",
                    "--etcd-ca",
                    "/ca.pem",
                    "--etcd-cert",
                    "/c.pem",
                ],
                "--etcd-cert needs --etcd-key",
            ),
            (
                &[
                    "--cluster-etcd",
                    "127.0.0.1:2379",
                    "--etcd-cert",
                    "/c.pem",
                    "--etcd-key",
                    "/k.pem",
                ],
                "a client certificate needs TLS",
            ),
            (
                &[
                    "--cluster-etcd",
                    "127.0.0.1:2379",
                    "--etcd-password-file",
                    "/p",
                ],
                "a password needs --etcd-user",
            ),
        ];
        for (args, expected) in cases {
            let error = load(args).expect_err("refused").to_string();
            assert!(error.contains(expected), "{args:?}: {error}");
        }
        load(&[
            "--cluster-etcd",
            "https://127.0.0.1:2379,127.0.0.1:2380",
            "--etcd-ca",
            "/ca.pem",
            "--etcd-user",
            "muster",
        ])
        .expect("https:// and bare endpoints with a CA");
    }

    #[test]
    fn the_password_comes_from_one_place_and_shows_nowhere() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = dir.path().join("password");
        std::fs::write(&file, "file-secret\n").expect("write");
        let file_arg = file.display().to_string();
        let with_user = |extra: &[&str]| {
            let mut args = vec!["--cluster-etcd", "127.0.0.1:2379", "--etcd-user", "muster"];
            args.extend_from_slice(extra);
            load(&args).expect("valid settings")
        };
        let from_file = with_user(&["--etcd-password-file", &file_arg])
            .etcd_security(None)
            .expect("from the file");
        let credentials = from_file.credentials.expect("credentials");
        assert_eq!(credentials.user(), "muster");
        assert!(!format!("{credentials:?}").contains("file-secret"));
        with_user(&[])
            .etcd_security(Some("env-secret".into()))
            .expect("from the environment");
        let both = with_user(&["--etcd-password-file", &file_arg])
            .etcd_security(Some("env-secret".into()))
            .expect_err("two passwords");
        assert!(both.to_string().contains("one way only"), "{both}");
        assert!(!both.to_string().contains("secret\n"));
        let none = with_user(&[]).etcd_security(None).expect_err("no password");
        assert!(none.to_string().contains("MUSTER_ETCD_PASSWORD"), "{none}");
        let no_user = load(&["--cluster-etcd", "127.0.0.1:2379"])
            .expect("valid")
            .etcd_security(Some("env-secret".into()))
            .expect_err("a password without a user");
        assert!(!no_user.to_string().contains("env-secret"), "{no_user}");
        let help = Settings::command().render_long_help().to_string();
        assert!(!help.contains("file-secret") && !help.contains("env-secret"));
    }

    #[test]
    fn unreadable_tls_files_name_their_setting() {
        let settings = load(&[
            "--cluster-etcd",
            "https://127.0.0.1:2379",
            "--etcd-ca",
            "/nonexistent/etcd-ca.pem",
        ])
        .expect("valid settings");
        let error = settings.etcd_security(None).expect_err("no such file");
        assert!(
            error
                .to_string()
                .starts_with("invalid setting etcd-ca = /nonexistent/etcd-ca.pem: cannot read"),
            "{error}"
        );
    }
}
