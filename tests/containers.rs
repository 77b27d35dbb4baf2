//! The image and the compose files, run for real on a Docker engine (tests/docker): the image
//! builds without a registry and keeps its contract; `docker-compose.yml` comes up healthy
//! with three workers sharing the partitions in one Stable group, which rebalances when a
//! worker's container is killed and when one is cut off its network; a musterd container
//! killed and started again has kept its groups and offsets (the /data volume); `down -v`
//! leaves nothing behind; and deploy/secure/ runs with the tokens and certificates its
//! scripts make.
//!
//! Skipped, saying so, where no engine is reachable; CI and MUSTER_REQUIRE_DOCKER=1 make that
//! a failure. The workers' session timeout is the server's minimum (6 s), so a dead worker is
//! noticed within seconds.

mod docker;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use docker::group::{stable_with, PARTITIONS};
use docker::{docker, engine, image, json, repo, wait_for, Compose};
use serde_json::Value;

/// Long enough for a compose step on a loaded 2-core machine; a step normally takes seconds.
const STEP: Duration = Duration::from_secs(90);

/// `muster --json ARGS` inside the musterd container.
fn cli(compose: &Compose, env: &[(&str, &str)], args: &[&str]) -> Result<Value, String> {
    let mut argv = vec!["muster", "--json"];
    argv.extend_from_slice(args);
    json(&compose.exec("musterd", env, &argv))
}

/// Waits until `group` is Stable with `names` sharing `topic`; its generation.
fn wait_stable(
    compose: &Compose,
    env: &[(&str, &str)],
    extra: &[&str],
    group: &str,
    topic: &str,
    names: &[&str],
) -> i64 {
    let mut args = extra.to_vec();
    args.extend(["groups", "describe", group]);
    wait_for(
        &format!("group {group} Stable with {names:?}"),
        STEP,
        || stable_with(&cli(compose, env, &args)?, topic, names),
    )
}

/// The demo group's committed offsets, partition → offset.
fn offsets(compose: &Compose) -> Result<BTreeMap<i64, i64>, String> {
    Ok(docker::group::offsets(&cli(
        compose,
        &[],
        &["offsets", "get", "demo"],
    )?))
}

const WORKERS: [&str; 3] = ["worker-1", "worker-2", "worker-3"];

/// Makes a failing step show what the containers said.
fn explain(compose: &Compose) -> impl Drop + '_ {
    struct Explain<'a>(&'a Compose);
    impl Drop for Explain<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                for service in ["musterd", "worker-1", "worker-2", "worker-3"] {
                    eprintln!("--- {service} ---\n{}", self.0.logs(service));
                }
            }
        }
    }
    Explain(compose)
}

#[test]
fn the_image_builds_without_a_registry_and_keeps_its_contract() {
    if engine("the_image_builds_without_a_registry_and_keeps_its_contract").is_none() {
        return;
    }
    let image = image();
    let config: Value = serde_json::from_str(&docker(&[
        "image",
        "inspect",
        "-f",
        "{{json .Config}}",
        image,
    ]))
    .expect("image config is JSON");
    assert_eq!(config["User"], "muster", "{config}");
    assert!(config["Volumes"]["/data"].is_object(), "{config}");
    for port in ["7450/tcp", "7451/tcp"] {
        assert!(config["ExposedPorts"][port].is_object(), "{port}: {config}");
    }
    let env: Vec<&str> = config["Env"]
        .as_array()
        .expect("Env")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for var in [
        "MUSTER_LISTEN=0.0.0.0:7450",
        "MUSTER_ADMIN_LISTEN=0.0.0.0:7451",
        "MUSTER_DATA_DIR=/data",
        "MUSTER_LOG_FORMAT=json",
    ] {
        assert!(env.contains(&var), "{var} in {env:?}");
    }
    assert!(
        config["Healthcheck"]["Test"]
            .to_string()
            .contains("/readyz"),
        "{config}"
    );
    assert_eq!(config["StopSignal"], "SIGTERM");
    assert_eq!(config["Entrypoint"][0], "/usr/local/bin/musterd");

    // The binaries run on the base (their libraries are there) as uid 10001, and so does the
    // health check's curl.
    let run = |entrypoint: &str, args: &[&str]| {
        let mut argv = vec!["run", "--rm", "--entrypoint", entrypoint, image];
        argv.extend_from_slice(args);
        docker(&argv)
    };
    assert_eq!(run("id", &["-u"]), "10001");
    assert!(run("musterd", &["--version"]).starts_with("musterd "));
    assert!(run("muster", &["--version"]).starts_with("muster "));
    assert!(run("worker", &["--help"]).contains("--server"));
    assert!(run("curl", &["--version"]).starts_with("curl "));
}

#[test]
fn compose_workers_share_partitions_and_rebalance_after_a_killed_container_and_a_cut_network() {
    let Some(engine) = engine(
        "compose_workers_share_partitions_and_rebalance_after_a_killed_container_and_a_cut_network",
    ) else {
        return;
    };
    let mut compose = Compose::new(engine, &repo().join("docker-compose.yml"), image());
    {
        let _explain = explain(&compose);
        compose.up();
        assert_eq!(compose.health("musterd"), "healthy");
        let first = wait_stable(&compose, &[], &[], "demo", "orders", &WORKERS);

        // SIGKILL: no LeaveGroup; the member expires after its session timeout.
        docker(&["kill", &compose.container("worker-3")]);
        let second = wait_stable(
            &compose,
            &[],
            &[],
            "demo",
            "orders",
            &["worker-1", "worker-2"],
        );
        assert!(second > first, "a rebalance: generation {first} → {second}");

        // Cut off: its heartbeats stop reaching musterd, so it expires too.
        let worker2 = compose.container("worker-2");
        let networks = compose.networks("worker-2");
        assert_eq!(networks.len(), 1, "{networks:?}");
        docker(&["network", "disconnect", &networks[0], &worker2]);
        let third = wait_stable(&compose, &[], &[], "demo", "orders", &["worker-1"]);
        assert!(third > second, "generation {second} → {third}");

        // Back on the network, it joins again.
        docker(&["network", "connect", &networks[0], &worker2]);
        wait_stable(
            &compose,
            &[],
            &[],
            "demo",
            "orders",
            &["worker-1", "worker-2"],
        );
    }
    compose.down();
    assert_eq!(
        compose.leftovers(),
        Vec::<String>::new(),
        "down -v removes the project's containers, volume and network"
    );
}

#[test]
fn a_killed_and_restarted_musterd_container_keeps_groups_and_offsets() {
    let Some(engine) = engine("a_killed_and_restarted_musterd_container_keeps_groups_and_offsets")
    else {
        return;
    };
    let compose = Compose::new(engine, &repo().join("docker-compose.yml"), image());
    let _explain = explain(&compose);
    compose.up();
    wait_stable(&compose, &[], &[], "demo", "orders", &WORKERS);

    // The workers commit their positions and leave on SIGTERM: an Empty group with offsets.
    let mut stop = vec!["stop", "--timeout", "10"];
    stop.extend(WORKERS);
    compose.compose(&stop);
    wait_for("group demo Empty", STEP, || {
        let group = cli(&compose, &[], &["groups", "describe", "demo"])?;
        (group["state"] == "Empty")
            .then_some(())
            .ok_or_else(|| group.to_string())
    });
    let before = offsets(&compose).expect("offsets");
    assert_eq!(
        before.keys().copied().collect::<Vec<_>>(),
        (0..PARTITIONS).collect::<Vec<_>>(),
        "every partition committed: {before:?}"
    );

    // SIGKILL, no shutdown: only what is on the /data volume comes back.
    let old = compose.container("musterd");
    docker(&["kill", &old]);
    compose.compose(&["start", "musterd"]);
    assert_eq!(compose.container("musterd"), old, "the same container");
    compose.wait_healthy("musterd", STEP);
    let groups = cli(&compose, &[], &["groups", "list"]).expect("groups list");
    assert!(groups.to_string().contains("\"demo\""), "{groups}");
    assert_eq!(offsets(&compose).expect("offsets"), before);

    // The workers come back and go on from the committed offsets: the first offsets that
    // change are all at least where they were.
    let mut start = vec!["start"];
    start.extend(WORKERS);
    compose.compose(&start);
    wait_stable(&compose, &[], &[], "demo", "orders", &WORKERS);
    let after = wait_for("new commits", STEP, || {
        let now = offsets(&compose)?;
        (now != before).then_some(now).ok_or("unchanged".to_owned())
    });
    for (partition, offset) in &before {
        assert!(
            after.get(partition).is_some_and(|a| a >= offset),
            "partition {partition} went back: {before:?} → {after:?}"
        );
    }
}

/// Copies the secure example to `dir` and runs its scripts there (never in the repository,
/// where someone's real secrets may be); the ops token.
fn secure_example(dir: &Path) -> String {
    let source = repo().join("deploy/secure");
    for file in [
        "docker-compose.yml",
        "make-certs.sh",
        "make-auth.sh",
        "auth.toml.template",
    ] {
        std::fs::copy(source.join(file), dir.join(file)).expect("copy the secure example");
    }
    for script in [vec!["make-certs.sh", "certs", "ops"], vec!["make-auth.sh"]] {
        docker::run(
            std::process::Command::new("sh")
                .args(&script)
                .current_dir(dir),
        );
    }
    let env = std::fs::read_to_string(dir.join(".env")).expect(".env written");
    env.lines()
        .find_map(|l| l.strip_prefix("OPS_TOKEN="))
        .expect("an ops token")
        .to_owned()
}

#[test]
fn the_secure_compose_runs_workers_with_tokens_over_tls() {
    let Some(engine) = engine("the_secure_compose_runs_workers_with_tokens_over_tls") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let ops = secure_example(dir.path());
    let compose = Compose::new(engine, &dir.path().join("docker-compose.yml"), image());
    let _explain = explain(&compose);
    compose.up();
    // Its health check speaks HTTPS with the made CA.
    assert_eq!(compose.health("musterd"), "healthy");
    let tls = [
        "--server",
        "localhost:7450",
        "--tls-ca",
        "/etc/muster/certs/ca.pem",
    ];
    wait_stable(
        &compose,
        &[("MUSTER_TOKEN", &ops)],
        &tls,
        "orders-workers",
        "orders-placed",
        &WORKERS,
    );

    // Without a token, or without TLS, nothing is answered.
    let mut anonymous = vec!["muster"];
    anonymous.extend(tls);
    anonymous.extend(["groups", "list"]);
    let out = compose.exec("musterd", &[], &anonymous);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let plain = compose.exec(
        "musterd",
        &[("MUSTER_TOKEN", &ops)],
        &["muster", "--server", "localhost:7450", "groups", "list"],
    );
    assert!(!plain.status.success(), "plain TCP is refused: {plain:?}");
}
