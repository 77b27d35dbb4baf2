//! The auth file compiled for lookups: every principal's [`Identity`] (its grants, with the
//! `"*"` ACLs folded in, its quota and its request-rate limiter) by name and by token. A reload
//! compiles a new [`Rules`] and swaps it in whole; quotas (from the shared table) and rate
//! limiters whose rate did not change carry over, so a reload resets no count.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota as RateQuota, RateLimiter};
use muster_auth::{find_token, AuthFile, TokenHash};
use muster_coordinator::access::{Access, Principal};
use muster_coordinator::quota::Quotas;

use super::connections::ConnectionCap;
use super::Loaded;

/// A principal as a session holds it.
#[derive(Clone, Default)]
pub struct Identity {
    pub access: Access,
    /// `max_requests_per_s`, shared by all of the principal's connections.
    pub rate: Option<Arc<RequestRate>>,
    /// Its open connections and `max_connections` (`None`: no auth file, nobody counted).
    pub connections: Option<Arc<ConnectionCap>>,
}

impl Identity {
    /// No auth file: everything allowed, nothing limited.
    pub fn open() -> Self {
        Identity::default()
    }

    /// A principal the auth file no longer declares: no grants, its quota and its request-rate
    /// limiter kept (cut off, it must not be free to flood the server with denied requests).
    pub(super) fn revoked(name: &Arc<str>, quotas: &Quotas, was: &Identity) -> Self {
        Identity {
            access: Access::principal(Arc::new(Principal::new(
                Arc::clone(name),
                Vec::new(),
                quotas.get(name),
            ))),
            rate: was.rate.clone(),
            connections: was.connections.clone(),
        }
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("principal", &self.access.name())
            .field("rate", &self.rate.as_ref().map(|r| r.per_second))
            .finish()
    }
}

/// A principal's request-rate quota: a GCRA limiter (`governor`) allowing `per_second`
/// requests each second, in bursts of up to that many.
pub struct RequestRate {
    per_second: u32,
    limiter: DefaultDirectRateLimiter,
}

impl RequestRate {
    pub fn new(per_second: NonZeroU32) -> Self {
        RequestRate {
            per_second: per_second.get(),
            limiter: RateLimiter::direct(RateQuota::per_second(per_second)),
        }
    }

    pub fn per_second(&self) -> u32 {
        self.per_second
    }

    /// Takes one request's cell if the quota has one free now.
    pub fn try_admit(&self) -> bool {
        self.limiter.check().is_ok()
    }

    /// Waits until one request's cell is free, and takes it. Waiters take cells one by one, so
    /// however many connections wait, the principal's rate stays within the quota.
    pub async fn admit(&self) {
        self.limiter.until_ready().await;
    }
}

/// The compiled auth file.
#[derive(Default)]
pub struct Rules {
    principals: HashMap<Arc<str>, Identity>,
    /// Token hashes and, at the same index, their principal.
    tokens: Vec<TokenHash>,
    token_owners: Vec<Arc<str>>,
    acls: usize,
}

impl Rules {
    /// Compiles `file`. Quotas come from the shared table (their limits are set here);
    /// rate limiters whose rate is unchanged are taken over from `previous`.
    pub fn compile(file: &AuthFile, quotas: &Quotas, previous: Option<&Rules>) -> Self {
        let mut rules = Rules {
            acls: file.acls.len(),
            ..Rules::default()
        };
        for spec in &file.principals {
            let name: Arc<str> = Arc::from(spec.name.as_str());
            let quota = quotas.get(&name);
            quota.set_limits(spec.max_groups, spec.max_members);
            let rate = spec.max_requests_per_s.and_then(NonZeroU32::new).map(|n| {
                previous
                    .and_then(|p| p.principals.get(&name))
                    .and_then(|old| old.rate.clone())
                    .filter(|old| old.per_second == n.get())
                    .unwrap_or_else(|| Arc::new(RequestRate::new(n)))
            });
            // Carried over whatever its limit, so that a reload keeps counting the open ones.
            let connections = previous
                .and_then(|p| p.principals.get(&name))
                .and_then(|old| old.connections.clone())
                .inspect(|cap| cap.set_max(spec.max_connections))
                .unwrap_or_else(|| Arc::new(ConnectionCap::new(spec.max_connections)));
            let principal = Principal::new(Arc::clone(&name), file.grants_for(&spec.name), quota);
            let identity = Identity {
                access: Access::principal(Arc::new(principal)),
                rate,
                connections: Some(connections),
            };
            if let Some(token) = spec.token {
                rules.tokens.push(token);
                rules.token_owners.push(Arc::clone(&name));
            }
            rules.principals.insert(name, identity);
        }
        rules
    }

    pub fn summary(&self) -> Loaded {
        Loaded {
            principals: self.principals.len(),
            acls: self.acls,
        }
    }

    pub fn by_name(&self, name: &str) -> Option<Identity> {
        self.principals.get(name).cloned()
    }

    /// The principal a token belongs to: hashed once, compared with every token in constant
    /// time.
    pub fn by_token(&self, token: &str) -> Option<Identity> {
        let i = find_token(token, &self.tokens)?;
        self.by_name(&self.token_owners[i])
    }
}

#[cfg(test)]
mod tests {
    use muster_coordinator::access::{Operation, ResourceType};
    use muster_coordinator::quota::QuotaKind;

    use super::*;

    fn file(text: &str) -> AuthFile {
        AuthFile::parse(text).expect("auth file")
    }

    const FILE: &str = r#"
[[principals]]
name = "orders"
token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
max_groups = 2
max_requests_per_s = 100
[[principals]]
name = "cert-only"
[[acls]]
principal = "orders"
resource = "group"
pattern = "orders-*"
operations = ["read"]
[[acls]]
principal = "*"
resource = "topic"
pattern = "*"
operations = ["describe"]
"#;

    #[test]
    fn principals_are_found_by_token_and_by_name_with_their_grants() {
        let quotas = Quotas::default();
        let rules = Rules::compile(&file(FILE), &quotas, None);
        let orders = rules.by_token("test").expect("token");
        assert_eq!(orders.access.name(), "orders");
        assert!(orders
            .access
            .allows(ResourceType::Group, "orders-1", Operation::Read));
        assert!(orders
            .access
            .allows(ResourceType::Topic, "any", Operation::Describe));
        assert!(rules.by_token("other").is_none());
        let cert = rules.by_name("cert-only").expect("by name");
        assert!(!cert
            .access
            .allows(ResourceType::Group, "orders-1", Operation::Read));
        assert!(cert.rate.is_none());
        assert_eq!(quotas.get("orders").max(QuotaKind::Groups), Some(2));
        assert_eq!(rules.summary().principals, 2);
    }

    #[test]
    fn a_recompile_keeps_counts_and_unchanged_rate_limiters() {
        let quotas = Quotas::default();
        let first = Rules::compile(&file(FILE), &quotas, None);
        let held = quotas.get("orders").take(QuotaKind::Groups);
        let second = Rules::compile(&file(FILE), &quotas, Some(&first));
        let rate = |r: &Rules| r.by_name("orders").and_then(|i| i.rate).expect("rate");
        assert!(Arc::ptr_eq(&rate(&first), &rate(&second)));
        assert_eq!(quotas.get("orders").used(QuotaKind::Groups), 1);
        let changed = Rules::compile(
            &file(&FILE.replace("max_requests_per_s = 100", "max_requests_per_s = 7")),
            &quotas,
            Some(&second),
        );
        assert_eq!(rate(&changed).per_second(), 7);
        drop(held);
    }

    #[test]
    fn the_rate_admits_a_second_of_requests_then_refuses() {
        let rate = RequestRate::new(NonZeroU32::new(50).expect("50"));
        let admitted = (0..60).filter(|_| rate.try_admit()).count();
        // 50 within the burst; a 51st only if a cell came back meanwhile (1/50 s).
        assert!((50..=51).contains(&admitted), "{admitted}");
    }

    #[test]
    fn waiting_admissions_are_spaced_by_the_rate() {
        let rate = Arc::new(RequestRate::new(NonZeroU32::new(1000).expect("1000")));
        while rate.try_admit() {}
        // 20 more at 1000/s take about 20 ms, not 1 ms (each waiter takes its own cell).
        let started = std::time::Instant::now();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let waiters = (0..20).map(|_| {
                let rate = Arc::clone(&rate);
                tokio::spawn(async move { rate.admit().await })
            });
            for waiter in waiters.collect::<Vec<_>>() {
                waiter.await.expect("waiter");
            }
        });
        assert!(started.elapsed() >= std::time::Duration::from_millis(15));
    }
}
