//! The container files, checked without a Docker engine: `docker-compose.yml` parses and
//! every command and setting in it (and the Dockerfile's ENV) is one `musterd` and the example
//! worker accept; the image holds targets that exist, runs as non-root, exposes the ports,
//! keeps state on /data, and health-checks /readyz. tests/containers.rs (the workspace's root
//! package) runs them for real on a Docker engine.

use std::collections::BTreeMap;
use std::path::PathBuf;

use muster_server::config::Settings;
use yaml_rust2::{Yaml, YamlLoader};

/// The worker example's source with the `muster_client::args::ConnectArgs` it flattens in
/// (`--token`, `--tls-*` and their environment variables are defined there).
fn worker_source() -> String {
    let mut source = repo_file("crates/muster-client/examples/worker.rs");
    assert!(
        source.contains("#[command(flatten)]") && source.contains("connect: ConnectArgs"),
        "the worker example flattens muster_client::args::ConnectArgs"
    );
    source.push_str(&repo_file("crates/muster-client/src/args.rs"));
    source
}

fn repo_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn strings(node: &Yaml) -> Vec<String> {
    node.as_vec()
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A service with YAML merge keys (`<<: *anchor`) applied.
fn service(services: &Yaml, name: &str) -> BTreeMap<String, Yaml> {
    let node = &services[name];
    let mut merged = BTreeMap::new();
    if let Some(base) = node["<<"].as_hash() {
        for (k, v) in base {
            merged.insert(k.as_str().unwrap_or_default().to_owned(), v.clone());
        }
    }
    for (k, v) in node
        .as_hash()
        .unwrap_or_else(|| panic!("service {name} missing"))
    {
        let key = k.as_str().unwrap_or_default();
        if key != "<<" {
            merged.insert(key.to_owned(), v.clone());
        }
    }
    merged
}

/// ENV lines of the Dockerfile's last stage, as (key, value).
fn dockerfile_env(dockerfile: &str) -> Vec<(String, String)> {
    let runtime = dockerfile.rsplit("\nFROM ").next().unwrap_or_default();
    let joined = runtime.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ENV "))
        .flat_map(|rest| {
            rest.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// The settings `musterd` starts with in a compose service: the image's ENV plus the service's
/// environment and command, through the same parser as at startup. Also checks containers log
/// JSON. Environment variables are process-wide, so one test at a time sets them.
fn musterd_settings(musterd: &BTreeMap<String, Yaml>) -> Settings {
    static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _env = ENV
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut env: Vec<(String, String)> = dockerfile_env(&repo_file("Dockerfile"));
    if let Some(vars) = musterd["environment"].as_hash() {
        for (k, v) in vars {
            let value = v
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{v:?}"));
            env.push((k.as_str().unwrap_or_default().to_owned(), value));
        }
    }
    assert!(
        env.iter()
            .any(|(k, v)| k == "MUSTER_LOG_FORMAT" && v == "json"),
        "containers log JSON: {env:?}"
    );
    for (k, _) in &env {
        assert!(k.starts_with("MUSTER_"), "unexpected variable {k}");
        std::env::remove_var(k);
    }
    for (k, v) in &env {
        std::env::set_var(k, v);
    }
    let command = strings(&musterd["command"]);
    let settings = Settings::load(std::iter::once("musterd".to_owned()).chain(command));
    for (k, _) in &env {
        std::env::remove_var(k);
    }
    settings.expect("compose's musterd settings are valid")
}

#[test]
fn compose_file_runs_musterd_and_three_workers_with_valid_settings() {
    let docs = YamlLoader::load_from_str(&repo_file("docker-compose.yml")).expect("valid YAML");
    let compose = &docs[0];
    let services = &compose["services"];

    let musterd = service(services, "musterd");
    let ports = strings(&musterd["ports"]);
    assert!(
        ports.iter().any(|p| p.ends_with(":7450")),
        "client port published: {ports:?}"
    );
    assert!(
        ports.iter().any(|p| p.ends_with(":7451")),
        "admin port published: {ports:?}"
    );
    let volumes = strings(&musterd["volumes"]);
    let named = volumes
        .iter()
        .find_map(|v| v.strip_suffix(":/data"))
        .expect("state on a volume at /data");
    assert!(
        !compose["volumes"][named].is_badvalue(),
        "volume {named} is declared as a named volume"
    );
    let health = strings(&musterd["healthcheck"]["test"]).join(" ");
    assert!(health.contains("http://127.0.0.1:7451/readyz"), "{health}");

    let settings = musterd_settings(&musterd);
    assert_eq!(settings.listen, "0.0.0.0:7450");
    assert_eq!(settings.admin_listen, "0.0.0.0:7451");
    assert_eq!(settings.data_dir, PathBuf::from("/data"));

    let workers: Vec<String> = services
        .as_hash()
        .expect("services")
        .keys()
        .filter_map(|k| k.as_str())
        .filter(|k| k.starts_with("worker"))
        .map(str::to_owned)
        .collect();
    assert_eq!(workers.len(), 3, "three example workers: {workers:?}");
    for name in &workers {
        let worker = service(services, name);
        assert_eq!(
            strings(&worker["entrypoint"]),
            vec!["/usr/local/bin/worker"]
        );
        let command = strings(&worker["command"]);
        let server = command
            .iter()
            .skip_while(|a| *a != "--server")
            .nth(1)
            .expect("--server given");
        assert_eq!(
            server, "musterd:7450",
            "{name} talks to the musterd service"
        );
        assert_eq!(
            worker["environment"]["MUSTER_GROUP"].as_str(),
            Some("demo"),
            "{name} joins the shared group"
        );
        assert_eq!(
            worker["depends_on"]["musterd"]["condition"].as_str(),
            Some("service_healthy")
        );
        // Only flags the worker example defines.
        // The worker's own flags, and the connection flags it flattens in (`ConnectArgs`).
        let example = worker_source();
        for flag in command.iter().filter(|a| a.starts_with("--")) {
            let field = flag.trim_start_matches("--").replace('-', "_");
            assert!(
                example.contains(&format!("{field}:")),
                "worker has no {flag} flag"
            );
        }
    }
}

#[test]
fn the_image_is_built_from_existing_targets_and_runs_safely() {
    // The binaries are built on the host by deploy/docker/build-image.sh (no image registry
    // for a Rust image); the Dockerfile copies what it staged.
    let script = repo_file("deploy/docker/build-image.sh");
    let build = script
        .replace("\\\n", " ")
        .lines()
        .find(|l| l.contains("cargo build") && l.contains(" -p "))
        .expect("a cargo build step")
        .to_owned();
    assert!(
        build.contains("--release") && build.contains("--locked"),
        "{build}"
    );
    let words: Vec<&str> = build
        .split_whitespace()
        .map(|w| w.trim_end_matches(')'))
        .collect();
    let mut built = Vec::new();
    for pair in words.windows(2) {
        match pair[0] {
            "-p" => {
                let manifest = format!("crates/{}/Cargo.toml", pair[1]);
                assert!(
                    repo_file(&manifest).contains(pair[1]),
                    "package {} exists",
                    pair[1]
                );
            }
            "--example" => {
                let found = std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
                    .expect("crates dir")
                    .filter_map(Result::ok)
                    .any(|c| c.path().join(format!("examples/{}.rs", pair[1])).exists());
                assert!(found, "example {} exists", pair[1]);
                built.push(pair[1]);
            }
            "--bin" => {
                let found = std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
                    .expect("crates dir")
                    .filter_map(Result::ok)
                    .any(|c| {
                        std::fs::read_to_string(c.path().join("Cargo.toml"))
                            .is_ok_and(|m| m.contains(&format!("name = \"{}\"", pair[1])))
                    });
                assert!(found, "binary {} exists", pair[1]);
                built.push(pair[1]);
            }
            _ => {}
        }
    }
    let dockerfile = repo_file("Dockerfile");
    // Every binary the image copies is one the script builds, and the other way round.
    let copy = dockerfile
        .lines()
        .find(|l| l.starts_with("COPY "))
        .expect("a COPY of the binaries");
    let copied: Vec<&str> = copy
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("bin/"))
        .collect();
    built.sort_unstable();
    let mut sorted = copied.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, built, "{copy}");
    assert!(
        dockerfile.contains("FROM ${BASE_IMAGE}")
            && script.contains("BASE_IMAGE=$base")
            && script.contains("debootstrap"),
        "the base image is made locally"
    );
    assert!(
        dockerfile.contains("\nUSER muster") && dockerfile.contains("--uid 10001"),
        "runs as a non-root user"
    );
    assert!(dockerfile.contains("VOLUME [\"/data\"]"));
    assert!(dockerfile.contains("EXPOSE 7450 7451"));
    assert!(dockerfile.contains("HEALTHCHECK") && dockerfile.contains("/readyz"));
    assert!(dockerfile.contains("STOPSIGNAL SIGTERM"));
}

/// The secure example's auth file template with every `@NAME_SHA256@` replaced by a hash, as
/// `make-auth.sh` does.
fn secure_auth_file() -> muster_auth::AuthFile {
    let mut text = repo_file("deploy/secure/auth.toml.template");
    for (i, principal) in ["ORDERS_SERVICE", "MONITORING", "OPS"].iter().enumerate() {
        let placeholder = format!("@{principal}_SHA256@");
        assert!(text.contains(&placeholder), "{placeholder} in the template");
        assert!(
            repo_file("deploy/secure/make-auth.sh")
                .contains(&principal.to_lowercase().replace('_', "-")),
            "make-auth.sh makes a token for {principal}"
        );
        text = text.replace(
            &placeholder,
            &muster_auth::TokenHash::of(&format!("token-{i}")).to_hex(),
        );
    }
    let left = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('@'))
        .count();
    assert_eq!(
        left, 0,
        "every placeholder is one make-auth.sh fills: {text}"
    );
    muster_auth::AuthFile::parse(&text).expect("the secure example's auth file is valid")
}

/// The value of `name` in a compose `environment` map.
fn env_var<'a>(service: &'a BTreeMap<String, Yaml>, name: &str) -> &'a str {
    service["environment"][name]
        .as_str()
        .unwrap_or_else(|| panic!("{name} is set"))
}

/// The host side of the bind mount that holds container `path`, and the path inside it.
fn mounted(service: &BTreeMap<String, Yaml>, path: &str) -> (String, String) {
    strings(&service["volumes"])
        .iter()
        .find_map(|v| {
            let mut parts = v.split(':');
            let (host, target) = (parts.next()?, parts.next()?);
            let rest = path.strip_prefix(target)?;
            (rest.is_empty() || rest.starts_with('/'))
                .then(|| (host.to_owned(), rest.trim_start_matches('/').to_owned()))
        })
        .unwrap_or_else(|| panic!("{path} is mounted into the container"))
}

#[test]
fn the_secure_compose_file_turns_on_auth_and_tls_with_made_certificates_and_tokens() {
    let docs = YamlLoader::load_from_str(&repo_file("deploy/secure/docker-compose.yml"))
        .expect("valid YAML");
    let compose = &docs[0];
    let services = &compose["services"];
    let musterd = service(services, "musterd");
    assert_eq!(
        musterd["image"].as_str(),
        Some("${MUSTER_IMAGE:-muster:local}"),
        "runs the image deploy/docker/build-image.sh builds"
    );
    let settings = musterd_settings(&musterd);
    assert_eq!(settings.listen, "0.0.0.0:7450");
    let auth_file = settings
        .auth_file()
        .expect("an auth file")
        .to_str()
        .expect("utf-8");
    let tls_cert = settings
        .tls_cert()
        .expect("TLS on")
        .to_str()
        .expect("utf-8");
    let tls_key = settings
        .tls_key()
        .expect("a TLS key")
        .to_str()
        .expect("utf-8");

    // Every file musterd reads is mounted from what the scripts make.
    let certs_script = repo_file("deploy/secure/make-certs.sh");
    let auth_script = repo_file("deploy/secure/make-auth.sh");
    let (host, inside) = mounted(&musterd, auth_file);
    assert_eq!(
        format!("{host}/{inside}"),
        "./secrets/auth.toml",
        "{auth_file}"
    );
    assert!(
        auth_script.contains("> secrets/auth.toml"),
        "make-auth.sh writes it"
    );
    for (path, made) in [(tls_cert, "server.pem"), (tls_key, "server.key")] {
        let (host, inside) = mounted(&musterd, path);
        assert_eq!(
            (host.as_str(), inside.as_str()),
            ("./certs", made),
            "{path}"
        );
    }
    assert!(
        certs_script.contains("out=\"${1:-certs}\"")
            && certs_script.contains("sign server musterd"),
        "make-certs.sh makes certs/server.pem and server.key by default"
    );
    // Every SAN a client uses: the workers' host, and localhost for the health check and the
    // host's CLI.
    for name in ["DNS:musterd", "DNS:localhost", "IP:127.0.0.1"] {
        assert!(
            certs_script.contains(name),
            "server certificate names {name}"
        );
    }
    let health = strings(&musterd["healthcheck"]["test"]).join(" ");
    assert!(
        health.contains("https://localhost:7451/readyz") && health.contains("--cacert"),
        "the admin listener is TLS too: {health}"
    );

    // The workers authenticate as orders-service over TLS, and their group and topics are
    // inside what orders-service may touch.
    let rules = secure_auth_file();
    let grants = rules.grants_for("orders-service");
    let allows = |resource, name: &str, op| grants.iter().any(|g| g.allows(resource, name, op));
    use muster_auth::{Operation, ResourceType};
    let env_file_vars: Vec<String> = ["ORDERS_SERVICE", "MONITORING", "OPS"]
        .iter()
        .map(|p| format!("{p}_TOKEN"))
        .collect();
    assert!(
        auth_script.contains("${var}_TOKEN=$token"),
        "make-auth.sh writes .env"
    );
    // Names agreed for every Muster client (helper-common: --token / --tls-ca and their env).
    let client_env = [
        "MUSTER_SERVER",
        "MUSTER_GROUP",
        "MUSTER_TOPICS",
        "MUSTER_TOKEN",
        "MUSTER_TLS_CA",
    ];
    // The worker's own flags, and the connection flags it flattens in (`ConnectArgs`).
    let example = worker_source();
    for name in ["worker-1", "worker-2", "worker-3"] {
        let worker = service(services, name);
        for key in worker["environment"].as_hash().expect("environment").keys() {
            let key = key.as_str().unwrap_or_default();
            assert!(client_env.contains(&key), "{name}: unknown variable {key}");
            // And the worker really reads it (a variable it ignored would leave it plaintext
            // or unauthenticated).
            assert!(
                example.contains(&format!("env = \"{key}\"")),
                "the worker example does not read {key}"
            );
        }
        let token = env_var(&worker, "MUSTER_TOKEN");
        assert!(
            token.starts_with("${ORDERS_SERVICE_TOKEN:?"),
            "{name} takes orders-service's token from .env: {token}"
        );
        assert!(env_file_vars.iter().any(|v| token.contains(v.as_str())));
        let ca = env_var(&worker, "MUSTER_TLS_CA");
        let (host, inside) = mounted(&worker, ca);
        assert_eq!(
            format!("{host}{inside}"),
            "./certs/ca.pem",
            "{name} trusts the CA"
        );
        let group = env_var(&worker, "MUSTER_GROUP");
        assert!(
            allows(ResourceType::Group, group, Operation::Read),
            "{name}: group {group}"
        );
        for topic in env_var(&worker, "MUSTER_TOPICS").split(',') {
            // The worker creates its topics and commits their offsets.
            assert!(
                allows(ResourceType::Topic, topic, Operation::Create),
                "{topic}"
            );
            assert!(
                allows(ResourceType::Topic, topic, Operation::Read),
                "{topic}"
            );
        }
        assert!(
            !allows(ResourceType::Group, "billing-workers", Operation::Read),
            "orders-service is confined to orders-*"
        );
    }
    let ignored = repo_file("deploy/secure/.gitignore");
    for secret in ["/certs/", "/secrets/", "/.env"] {
        assert!(
            ignored.lines().any(|l| l == secret),
            "{secret} is git-ignored"
        );
    }
}
