//! A test etcd as production runs it: TLS on the client port with client certificates
//! required (`--client-cert-auth`, [`super::Pki`]), and, when users are asked for,
//! authentication: a root user, then each test user with a role of its own that may read and
//! write under its prefix only, all made through the gRPC Auth API, then `AuthEnable`.

use std::time::Duration;

use crate::client::{EtcdClient, EtcdClientOptions};
use crate::generated::authpb::{permission, Permission};
use crate::generated::etcdserverpb::auth_client::AuthClient;
use crate::generated::etcdserverpb::{
    AuthEnableRequest, AuthRoleAddRequest, AuthRoleGrantPermissionRequest, AuthUserAddRequest,
    AuthUserGrantRoleRequest,
};
use crate::keys::prefix_end;
use crate::security::{EtcdCredentials, EtcdSecurity, EtcdTls};

use super::{EtcdCluster, TestkitError};

/// The password of the secure test etcd's `root` user.
pub const ROOT_PASSWORD: &str = "root-test-password";

/// A user of a secure test etcd, with a role of its own (`<name>-role`) that may read and
/// write under `prefix` (`None`: the role grants nothing; `read_only`: only read).
#[derive(Debug, Clone)]
pub struct TestUser {
    pub name: String,
    pub password: String,
    pub prefix: Option<String>,
    pub read_only: bool,
}

impl TestUser {
    pub fn new(name: &str, password: &str, prefix: Option<&str>) -> Self {
        TestUser {
            name: name.into(),
            password: password.into(),
            prefix: prefix.map(str::to_owned),
            read_only: false,
        }
    }

    /// A user whose role may only read under `prefix`.
    pub fn read_only(name: &str, password: &str, prefix: &str) -> Self {
        TestUser {
            read_only: true,
            ..TestUser::new(name, password, Some(prefix))
        }
    }
}

/// What a secure test etcd has on top of TLS with client certificates.
#[derive(Debug, Clone, Default)]
pub struct SecureOptions {
    /// Users to create; authentication is enabled when there are any.
    pub users: Vec<TestUser>,
    /// etcd's `--auth-token-ttl` in seconds: how long a token lives unused (etcd: 300). With
    /// `jwt`, how long a token lives at all (etcd: 5 minutes).
    pub auth_token_ttl_s: Option<u64>,
    /// JWT tokens (ES256, a key pair made with rcgen) instead of etcd's simple tokens.
    pub jwt: bool,
}

fn setup_failed(e: impl std::fmt::Display) -> TestkitError {
    TestkitError::Start(format!("setting up etcd's users: {e}"))
}

impl EtcdCluster {
    /// TLS with the testkit's CA and its good client certificate.
    pub fn tls(&self) -> Result<EtcdTls, TestkitError> {
        let pki = self
            .pki
            .as_ref()
            .ok_or_else(|| TestkitError::Start("this test etcd has no TLS".into()))?;
        EtcdTls::load(&pki.ca, Some((&pki.client.cert, &pki.client.key)))
            .map_err(|e| TestkitError::Start(e.to_string()))
    }

    /// TLS as [`EtcdCluster::tls`], authenticating as `user`.
    pub fn security(&self, user: &str, password: &str) -> Result<EtcdSecurity, TestkitError> {
        Ok(EtcdSecurity {
            tls: Some(self.tls()?),
            credentials: Some(
                EtcdCredentials::new(user, password.to_owned(), "the test")
                    .map_err(|e| TestkitError::Start(e.to_string()))?,
            ),
        })
    }

    /// Adds `user` (and its role) as root, on a cluster whose authentication is enabled. Also
    /// moves etcd's auth revision on: tokens issued before are refused as "old" once.
    pub fn add_user(&self, user: &TestUser) -> Result<(), TestkitError> {
        let security = self.security("root", ROOT_PASSWORD)?;
        self.run_as(
            security,
            |client| async move { add_user(&client, user).await },
        )
    }

    /// Creates root and every user of `options`, then enables authentication.
    pub(super) fn set_up_auth(&self, options: &SecureOptions) -> Result<(), TestkitError> {
        if options.users.is_empty() {
            return Ok(());
        }
        let security = EtcdSecurity {
            tls: Some(self.tls()?),
            credentials: None,
        };
        let root = TestUser::new("root", ROOT_PASSWORD, None);
        self.run_as(security, |client| async move {
            add_user(&client, &root).await?;
            grant_role(&client, "root", "root").await?;
            for user in &options.users {
                add_user(&client, user).await?;
            }
            client
                .call(|channel| async move {
                    AuthClient::new(channel)
                        .auth_enable(AuthEnableRequest {})
                        .await
                })
                .await
                .map_err(setup_failed)?;
            Ok(())
        })
    }

    /// Runs `work` with a client of this cluster on a runtime of its own (the testkit is
    /// called from plain test threads).
    fn run_as<'a, F, Fut>(&self, security: EtcdSecurity, work: F) -> Result<(), TestkitError>
    where
        F: FnOnce(EtcdClient) -> Fut + 'a,
        Fut: std::future::Future<Output = Result<(), TestkitError>> + 'a,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(setup_failed)?;
        runtime.block_on(async move {
            let options = EtcdClientOptions {
                security,
                ..EtcdClientOptions::new(Duration::from_secs(10))
            };
            let client =
                EtcdClient::connect_with(&self.endpoints(), &options).map_err(setup_failed)?;
            work(client).await
        })
    }
}

async fn add_user(client: &EtcdClient, user: &TestUser) -> Result<(), TestkitError> {
    let add = AuthUserAddRequest {
        name: user.name.clone(),
        password: user.password.clone(),
        ..AuthUserAddRequest::default()
    };
    client
        .call(|channel| {
            let add = add.clone();
            async move { AuthClient::new(channel).user_add(add).await }
        })
        .await
        .map_err(setup_failed)?;
    if user.name == "root" {
        // root's role is etcd's own.
        return Ok(());
    }
    let role = format!("{}-role", user.name);
    let add_role = AuthRoleAddRequest { name: role.clone() };
    client
        .call(|channel| {
            let add_role = add_role.clone();
            async move { AuthClient::new(channel).role_add(add_role).await }
        })
        .await
        .map_err(setup_failed)?;
    if let Some(prefix) = &user.prefix {
        let grant = AuthRoleGrantPermissionRequest {
            name: role.clone(),
            perm: Some(Permission {
                perm_type: if user.read_only {
                    permission::Type::Read as i32
                } else {
                    permission::Type::Readwrite as i32
                },
                key: prefix.as_bytes().to_vec(),
                range_end: prefix_end(prefix.as_bytes()),
            }),
        };
        client
            .call(|channel| {
                let grant = grant.clone();
                async move { AuthClient::new(channel).role_grant_permission(grant).await }
            })
            .await
            .map_err(setup_failed)?;
    }
    grant_role(client, &user.name, &role).await
}

async fn grant_role(client: &EtcdClient, user: &str, role: &str) -> Result<(), TestkitError> {
    let grant = AuthUserGrantRoleRequest {
        user: user.into(),
        role: role.into(),
    };
    client
        .call(|channel| {
            let grant = grant.clone();
            async move { AuthClient::new(channel).user_grant_role(grant).await }
        })
        .await
        .map_err(setup_failed)?;
    Ok(())
}
