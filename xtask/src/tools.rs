//! The programs the tests run, how to tell whether each is there, and installing the missing
//! ones from Debian's packages (`apt-get update`, then one non-interactive `apt-get install`,
//! through `sudo` when not root). Where it cannot install, the error names the packages.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _, Result};

/// One program a test (or CI) needs, and the Debian package that provides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    /// The name `cargo xtask install` takes.
    pub name: &'static str,
    /// The Debian package that provides it.
    pub package: &'static str,
    /// Who needs it, for the step messages.
    pub needed_by: &'static str,
    probe: Probe,
}

/// How to tell whether a tool is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Any of these programs is on `PATH` (or in /usr/sbin, /sbin for root's tools), or the
    /// variable names a file.
    Program {
        names: &'static [&'static str],
        env: Option<&'static str>,
    },
    /// `docker compose version` or `docker-compose version` succeeds.
    Compose,
    /// This command succeeds.
    Succeeds(&'static [&'static str]),
}

/// Every tool `cargo xtask install` knows, in the order it reports them.
pub const ALL: &[Tool] = &[
    Tool {
        name: "make",
        package: "make",
        needed_by: "building the workspace (tikv-jemalloc-sys builds jemalloc, musterd's allocator, with make; a fresh Debian with only gcc lacks it)",
        probe: Probe::Program {
            names: &["make"],
            env: None,
        },
    },
    Tool {
        name: "etcd",
        package: "etcd-server",
        needed_by: "the cluster-mode tests (crates/muster-server/tests/cluster*.rs, tests/cluster_requests.rs)",
        probe: Probe::Program {
            names: &["etcd"],
            env: Some("MUSTER_ETCD_BIN"),
        },
    },
    Tool {
        name: "chromium",
        package: "chromium",
        needed_by: "the dashboard's browser tests (tests/dashboard.rs)",
        probe: Probe::Program {
            names: &["chromium", "chromium-browser"],
            env: Some("MUSTER_CHROMIUM"),
        },
    },
    Tool {
        name: "mount",
        package: "mount",
        needed_by: "the full-disk test (crates/muster-server/tests/disk_full.rs mounts a tmpfs)",
        probe: Probe::Program {
            names: &["mount"],
            env: None,
        },
    },
    Tool {
        name: "kill",
        package: "procps",
        needed_by: "the signal tests (they send SIGTERM/SIGHUP with kill(1))",
        probe: Probe::Program {
            names: &["kill"],
            env: None,
        },
    },
    Tool {
        name: "docker",
        package: "docker.io",
        needed_by: "the container tests (tests/containers.rs, tests/cluster_containers.rs)",
        probe: Probe::Program {
            names: &["docker"],
            env: None,
        },
    },
    Tool {
        name: "compose",
        package: "docker-compose",
        needed_by: "the container tests (a compose tool: docker compose or docker-compose)",
        probe: Probe::Compose,
    },
    Tool {
        name: "debootstrap",
        package: "debootstrap",
        needed_by: "the container images' Debian base (deploy/docker/debian-image.sh)",
        probe: Probe::Program {
            names: &["debootstrap"],
            env: None,
        },
    },
    Tool {
        name: "openssl",
        package: "openssl",
        needed_by: "the secure compose's certificates and tokens (deploy/secure/make-certs.sh, make-auth.sh; crates/muster-server/tests/container.rs)",
        probe: Probe::Program {
            names: &["openssl"],
            env: None,
        },
    },
    Tool {
        name: "python3-venv",
        package: "python3-venv",
        needed_by: "the Python package's tests (python/tests, in a virtual environment under target/)",
        // Debian's python3 has the venv module but not ensurepip, which `python3 -m venv` needs.
        probe: Probe::Succeeds(&["python3", "-c", "import ensurepip, venv"]),
    },
    Tool {
        name: "protoc",
        package: "protobuf-compiler",
        needed_by: "the generated-code check (crates/muster-etcd/regenerate.sh --check)",
        probe: Probe::Program {
            names: &["protoc"],
            env: Some("PROTOC"),
        },
    },
    Tool {
        name: "python3",
        package: "python3",
        needed_by: "the fuzz smoke run's seed corpus (fuzz/seed-corpus.py) and the Python package's tests (python/)",
        probe: Probe::Program {
            names: &["python3"],
            env: None,
        },
    },
];

/// The tool called `name`.
pub fn named(name: &str) -> Result<Tool> {
    ALL.iter()
        .copied()
        .find(|t| t.name == name)
        .with_context(|| {
            let names: Vec<_> = ALL.iter().map(|t| t.name).collect();
            format!("no tool called {name:?} (known: {})", names.join(", "))
        })
}

impl Tool {
    /// Whether the tool is on this machine.
    pub fn present(&self) -> bool {
        match self.probe {
            Probe::Program { names, env } => {
                if env
                    .and_then(std::env::var_os)
                    .is_some_and(|v| Path::new(&v).is_file())
                {
                    return true;
                }
                names.iter().any(|name| find_program(name).is_some())
            }
            Probe::Compose => {
                succeeds(Command::new("docker").args(["compose", "version"]))
                    || succeeds(Command::new("docker-compose").arg("version"))
            }
            Probe::Succeeds(command) => match command.split_first() {
                Some((program, args)) => succeeds(Command::new(program).args(args)),
                None => false,
            },
        }
    }
}

/// `name` in a directory of `PATH`, or of /usr/sbin and /sbin (not on a user's `PATH` on
/// Debian, where debootstrap lives).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    search_path(name, &path)
}

fn search_path(name: &str, path: &OsString) -> Option<PathBuf> {
    std::env::split_paths(path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Whether `cmd` runs and exits 0 (its output discarded).
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // `id -u` rather than libc (the workspace forbids unsafe code).
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` run as root with the variables `vars`: directly, or through `sudo env` (sudo
/// resets the environment), or not at all (and why not).
pub fn as_root(program: &str, vars: &[(&str, &str)]) -> Result<Command> {
    if is_root() {
        let mut cmd = Command::new(program);
        cmd.envs(vars.iter().copied());
        return Ok(cmd);
    }
    if find_program("sudo").is_none() {
        bail!("this is not root and there is no sudo");
    }
    let mut cmd = Command::new("sudo");
    cmd.arg("env");
    cmd.args(vars.iter().map(|(k, v)| format!("{k}={v}")));
    cmd.arg(program);
    Ok(cmd)
}

/// Installs every tool of `tools` that is missing; says what it does. Fails naming the
/// packages when it cannot install them, or when a tool is still missing afterwards.
pub fn ensure(tools: &[Tool]) -> Result<()> {
    let missing: Vec<Tool> = tools.iter().copied().filter(|t| !t.present()).collect();
    for tool in tools {
        let state = if missing.contains(tool) {
            "missing"
        } else {
            "found"
        };
        crate::say(&format!(
            "  {:<12} {state:<8} ({}; Debian package {})",
            tool.name, tool.needed_by, tool.package
        ));
    }
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing.iter().map(|t| t.package).collect();
    let list = packages.join(" ");
    let by_hand = |why: &str| -> anyhow::Error {
        anyhow::anyhow!(
            "cannot install {list}: {why}. Install the package(s) {list} (Debian names) by hand \
             and run this again"
        )
    };
    if find_program("apt-get").is_none() {
        return Err(by_hand(
            "there is no apt-get on this machine (not Debian or Ubuntu?)",
        ));
    }
    let root =
        |vars: &[(&str, &str)]| as_root("apt-get", vars).map_err(|e| by_hand(&e.to_string()));
    crate::say(&format!("apt-get update, then apt-get install -y {list}"));
    let mut update = root(&[])?;
    update.args(["-q", "update"]);
    run_checked(&mut update).map_err(|e| by_hand(&format!("{e:#}")))?;
    // With Recommends: they carry what the tests use (protoc's well-known .proto files are in
    // libprotobuf-dev, a Recommends of protobuf-compiler; chromium's fonts). A run with
    // --no-install-recommends failed the generated-code check on google/protobuf/*.proto.
    let mut install = root(&[("DEBIAN_FRONTEND", "noninteractive")])?;
    install.args(["-q", "-y", "install"]).args(&packages);
    run_checked(&mut install).map_err(|e| {
        by_hand(&format!(
            "{e:#} (is every one of them a package of this distribution? `apt-cache policy {list}`)"
        ))
    })?;
    let still: Vec<&str> = missing
        .iter()
        .filter(|t| !t.present())
        .map(|t| t.package)
        .collect();
    if !still.is_empty() {
        bail!(
            "apt-get installed {list}, but these still do not provide their program: {}",
            still.join(" ")
        );
    }
    Ok(())
}

/// Runs `cmd` with the terminal as its output; fails when it does not exit 0.
pub fn run_checked(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// Bytes free for an unprivileged user on the filesystem holding `dir`, as `df -Pk` reports
/// them (`None` when df cannot tell).
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_df_available(&String::from_utf8_lossy(&out.stdout))
}

/// The "Available" column (KiB) of `df -Pk`'s one data line, in bytes.
fn parse_df_available(df: &str) -> Option<u64> {
    let line = df.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_read_from_df_posix_output() {
        let df = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n\
                  /dev/vda        263174212 12582912  83886080      13% /\n";
        assert_eq!(parse_df_available(df), Some(83_886_080 * 1024));
        assert_eq!(parse_df_available("Filesystem\n"), None);
        assert!(free_bytes(Path::new("/")).is_some_and(|b| b > 0));
    }

    #[test]
    fn every_tool_has_a_unique_name_and_a_package() {
        for (i, tool) in ALL.iter().enumerate() {
            assert!(!tool.package.is_empty(), "{tool:?}");
            assert!(
                ALL[i + 1..].iter().all(|other| other.name != tool.name),
                "{} twice",
                tool.name
            );
        }
        assert_eq!(named("etcd").map(|t| t.package).ok(), Some("etcd-server"));
        assert!(named("no-such-tool").is_err());
    }

    #[test]
    fn programs_are_found_on_the_path_only_where_they_are_files() {
        let dir = tempdir();
        std::fs::write(dir.join("etcd"), b"").expect("write a fake etcd");
        std::fs::create_dir(dir.join("chromium")).expect("a directory named chromium");
        let path = std::env::join_paths([dir.clone()]).expect("a PATH");
        assert_eq!(search_path("etcd", &path), Some(dir.join("etcd")));
        assert_eq!(search_path("chromium", &path), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-tools-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    }
}
