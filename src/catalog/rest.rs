//! The Iceberg REST catalog (iceberg-catalog-rest), with what it lacks for a server
//! that runs for days: it fetches an OAuth2 token once and never renews it. Here the
//! token is renewed before it expires (at [`RENEW_AT`] of its lifetime, learned from
//! the token endpoint's `expires_in`) and whenever the catalog answers 401 or 419, after
//! which the call is retried once. `Debug` shows no property values: the wrapped
//! catalog's would print the credential and the token.
//!
//! Tables are loaded, and Floe's own commits sent, by `rest_api` (the same token).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use iceberg::io::FileIOBuilder;
use iceberg::table::Table;
use iceberg::{
    Catalog, CatalogBuilder, Namespace, NamespaceIdent, Result, TableCommit, TableCreation,
    TableIdent,
};
use iceberg_catalog_rest::{RestCatalog, RestCatalogBuilder};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::commit::TableChanges;
use super::credentials::{self, LEASE_PROP, Renew, credentials_expiry};
use super::rest_api::{CommitAnswer, RestApi};
use super::storage::FloeStorageFactory;

/// Part of a token's lifetime after which it is renewed.
const RENEW_AT: f64 = 0.8;

/// Runs a catalog call with a fresh token; if the catalog still refuses
/// the token (revoked, or expired early), renews it and runs the call once more.
macro_rules! with_token {
    ($self:ident, $call:expr) => {{
        $self.fresh().await?;
        match $call.await {
            Err(e) if is_unauthorized(&e) => {
                $self.renew_now().await?;
                $call.await.map_err(|e| $self.refused(e))
            }
            result => result,
        }
    }};
}

pub struct RefreshingRestCatalog {
    inner: RestCatalog,
    /// The calls Floe makes itself (table loads, commits of its own changes).
    api: RestApi,
    name: String,
    /// The properties to log in with (an OAuth2 `credential`), if the catalog logs in.
    login: Option<HashMap<String, String>>,
    /// How long a token lives; `None` when the catalog uses no OAuth2 credential (a
    /// static `token`, or none), or the server did not say.
    lifetime: Option<Duration>,
    renew_after: Mutex<Instant>,
    /// This catalog, for the renewals of vended credentials it hands out.
    me: Weak<Self>,
}

impl std::fmt::Debug for RefreshingRestCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefreshingRestCatalog")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl RefreshingRestCatalog {
    /// Connects to the catalog at `props["uri"]` (`credential`, `token`, `scope`,
    /// `oauth2-server-uri`, `header.*`, `warehouse`, `prefix` and storage properties as
    /// iceberg-catalog-rest reads them).
    pub async fn connect(
        name: &str,
        mut props: HashMap<String, String>,
        runtime: iceberg::Runtime,
    ) -> crate::error::Result<Arc<Self>> {
        let unavailable =
            |e: String| crate::error::FloeError::unavailable(format!("catalog '{name}': {e}"));
        let (lifetime, login) = match props.get("credential") {
            Some(credential) if !props.contains_key("token") => {
                let token = fetch_token(&props, credential)
                    .await
                    .map_err(|e| unavailable(format!("cannot log in to the REST catalog: {e}")))?;
                let login = props.clone();
                props.insert("token".to_string(), token.access_token);
                (token.expires_in.map(Duration::from_secs), Some(login))
            }
            _ => (None, None),
        };
        let api = RestApi::connect(&props, props.get("token").cloned())
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let inner = RestCatalogBuilder::default()
            .with_storage_factory(Arc::new(FloeStorageFactory))
            .with_runtime(runtime)
            .load(name, props)
            .await?;
        Ok(Arc::new_cyclic(|me| Self {
            inner,
            api,
            name: name.to_string(),
            login,
            lifetime,
            renew_after: Mutex::new(renewal_time(lifetime)),
            me: me.clone(),
        }))
    }

    /// Renews the token if it is close to expiring.
    async fn fresh(&self) -> Result<()> {
        if self.lifetime.is_none() {
            return Ok(());
        }
        let mut renew_after = self.renew_after.lock().await;
        if Instant::now() >= *renew_after {
            self.renew(&mut renew_after).await?;
        }
        Ok(())
    }

    async fn renew(&self, renew_after: &mut Instant) -> Result<()> {
        tracing::debug!(catalog = %self.name, "renewing the REST catalog token");
        if let Some(login) = &self.login {
            let credential = login
                .get("credential")
                .map(String::as_str)
                .unwrap_or_default();
            let token = once_more_if_unsent(|| async {
                fetch_token(login, credential)
                    .await
                    .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::Unexpected, e))
            })
            .await
            .map_err(|e| self.refused(e))?;
            self.api.set_token(token.access_token);
        }
        once_more_if_unsent(|| self.inner.regenerate_token())
            .await
            .map_err(|e| self.refused(e))?;
        *renew_after = renewal_time(self.lifetime);
        Ok(())
    }

    /// A refused credential is the operator's to fix, and says so, naming the catalog.
    fn refused(&self, e: iceberg::Error) -> iceberg::Error {
        if !is_unauthorized(&e) {
            return e;
        }
        let message = format!(
            "the REST catalog '{}' refused Floe's credential (HTTP 401): check the catalog's \
             credential or token",
            self.name
        );
        iceberg::Error::new(iceberg::ErrorKind::Unexpected, message.clone())
            .with_source(crate::error::FloeError::unauthenticated(message))
    }

    /// Renews the vended credentials of a table: loads it again.
    fn renewal(&self, ident: &TableIdent) -> Renew {
        let (catalog, ident) = (self.me.clone(), ident.clone());
        Arc::new(move || {
            let (catalog, ident) = (catalog.clone(), ident.clone());
            Box::pin(async move {
                let catalog = catalog.upgrade().ok_or_else(|| {
                    iceberg::Error::new(iceberg::ErrorKind::Unexpected, "the catalog is closed")
                })?;
                let answer = with_token!(catalog, catalog.api.load_table(&ident))?;
                // Renewals reach executors: never the catalog's own credential.
                Ok(super::storage_only(&answer.file_io_props))
            })
        })
    }

    /// Sends Floe's own changes to a table; the server checks their requirements.
    pub async fn commit(&self, table: &TableIdent, changes: &TableChanges) -> Result<CommitAnswer> {
        with_token!(self, self.api.commit(table, changes))
    }

    /// Renews the token now (the catalog refused it).
    async fn renew_now(&self) -> Result<()> {
        let mut renew_after = self.renew_after.lock().await;
        self.renew(&mut renew_after).await
    }
}

/// Runs `call` once more if it failed before its request reached the server: a pooled
/// connection the server had just closed (asking for a token twice is harmless).
async fn once_more_if_unsent<T, F: Future<Output = Result<T>>>(call: impl Fn() -> F) -> Result<T> {
    match call().await {
        Err(e) if e.to_string().contains("error sending request") => call().await,
        result => result,
    }
}

fn renewal_time(lifetime: Option<Duration>) -> Instant {
    match lifetime {
        Some(lifetime) => Instant::now() + lifetime.mul_f64(RENEW_AT),
        None => Instant::now() + Duration::from_secs(365 * 24 * 3600),
    }
}

/// iceberg-catalog-rest reports an unexpected status only in the error's context.
fn is_unauthorized(e: &iceberg::Error) -> bool {
    let text = e.to_string();
    text.contains("401 Unauthorized") || text.contains("419 ")
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    expires_in: Option<u64>,
}

/// OAuth2 client credentials, as iceberg-catalog-rest sends them, to learn the
/// token's lifetime.
async fn fetch_token(
    props: &HashMap<String, String>,
    credential: &str,
) -> std::result::Result<TokenResponse, String> {
    let uri = props.get("uri").map(String::as_str).unwrap_or_default();
    let endpoint = props
        .get("oauth2-server-uri")
        .cloned()
        .unwrap_or_else(|| format!("{}/v1/oauth/tokens", uri.trim_end_matches('/')));
    let (client_id, client_secret) = match credential.split_once(':') {
        Some((id, secret)) => (Some(id), secret),
        None => (None, credential),
    };
    let mut form = vec![
        ("grant_type", "client_credentials"),
        ("client_secret", client_secret),
        (
            "scope",
            props.get("scope").map(String::as_str).unwrap_or("catalog"),
        ),
    ];
    if let Some(id) = client_id {
        form.push(("client_id", id));
    }
    for key in ["audience", "resource"] {
        if let Some(value) = props.get(key) {
            form.push((key, value));
        }
    }
    let response = reqwest::Client::new()
        .post(&endpoint)
        .form(&form)
        .send()
        .await
        .map_err(|e| format!("token endpoint {endpoint}: {}", e.without_url()))?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("token endpoint {endpoint}: {}", e.without_url()))?;
    if !status.is_success() {
        return Err(format!(
            "token endpoint {endpoint} answered {status} (is the credential right?)"
        ));
    }
    serde_json::from_slice(&body)
        .map_err(|e| format!("token endpoint {endpoint}: unexpected answer: {e}"))
}

#[async_trait]
impl Catalog for RefreshingRestCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        with_token!(self, self.inner.list_namespaces(parent))
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        with_token!(
            self,
            self.inner.create_namespace(namespace, properties.clone())
        )
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        with_token!(self, self.inner.get_namespace(namespace))
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        with_token!(self, self.inner.namespace_exists(namespace))
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        with_token!(
            self,
            self.inner.update_namespace(namespace, properties.clone())
        )
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        with_token!(self, self.inner.drop_namespace(namespace))
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        with_token!(self, self.inner.list_tables(namespace))
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        // Not retried: a creation cannot be copied. The token is renewed before.
        self.fresh().await?;
        self.inner.create_table(namespace, creation).await
    }

    /// Loaded with Floe's own call: the storage properties honour the table's `config`
    /// and `storage-credentials` (see `rest_api`). Credentials that expire get a lease,
    /// through which every FileIO built from them renews them (see `credentials`).
    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        let answer = with_token!(self, self.api.load_table(table))?;
        let mut props = answer.file_io_props;
        if let Some(expires) = credentials_expiry(&props) {
            let key = format!("{}/{table}", self.name);
            let lease = credentials::open_lease(&key, self.renewal(table), expires);
            props.insert(LEASE_PROP.to_string(), lease);
        }
        let builder = Table::builder()
            .identifier(table.clone())
            .file_io(
                FileIOBuilder::new(Arc::new(FloeStorageFactory))
                    .with_props(props)
                    .build(),
            )
            .metadata(answer.metadata)
            .runtime(iceberg::Runtime::try_current()?);
        match answer.metadata_location {
            Some(location) => builder.metadata_location(location).build(),
            None => builder.build(),
        }
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        with_token!(self, self.inner.drop_table(table))
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        with_token!(self, self.inner.purge_table(table))
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        with_token!(self, self.inner.table_exists(table))
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        with_token!(self, self.inner.rename_table(src, dest))
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        with_token!(
            self,
            self.inner.register_table(table, metadata_location.clone())
        )
    }

    /// Not retried (a commit cannot be sent twice); the token is renewed before.
    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        self.fresh().await?;
        self.inner.update_table(commit).await
    }
}
