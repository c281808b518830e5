//! The REST catalog calls Floe makes itself, beside iceberg-catalog-rest's:
//!
//! * **Load a table**, so that its storage properties are the ones the Iceberg REST spec
//!   (and Iceberg Java) asks for: the catalog's properties, overridden by the table's
//!   `config`, overridden by the most specific `storage-credentials` entry for the
//!   table's location. iceberg-catalog-rest 0.10.1 drops `storage-credentials` and lets
//!   the catalog's own properties win over the table's.
//! * **Commit [`TableChanges`]** (`POST …/tables/{t}`, a `CommitTableRequest`): iceberg
//!   0.10.1 lets only its own transaction actions build a `TableCommit`.
//!
//! The server's `/v1/config` answer (defaults, overrides, the path `prefix`) is read once
//! at connect, as iceberg-catalog-rest does. Nothing here formats a property value or
//! the token into a message or `Debug`.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use iceberg::spec::TableMetadata;
use iceberg::{Error, ErrorKind, Result, TableIdent};
use iceberg_catalog_rest::{
    CommitTableRequest, CommitTableResponse, LoadTableResult, StorageCredential,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;

use super::commit::TableChanges;

/// How long one REST call may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

pub struct RestApi {
    http: reqwest::Client,
    /// `{uri}/v1[/{prefix}]`.
    base: Url,
    /// The `header.*` properties (e.g. `X-Iceberg-Access-Delegation`).
    headers: HeaderMap,
    /// The catalog's properties with the server's defaults and overrides applied.
    props: HashMap<String, String>,
    token: RwLock<Option<String>>,
}

impl std::fmt::Debug for RestApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestApi")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// A table as the catalog answered it.
pub struct TableAnswer {
    pub metadata: TableMetadata,
    pub metadata_location: Option<String>,
    /// What the table's FileIO is built with (catalog, table and credential properties).
    pub file_io_props: HashMap<String, String>,
}

/// What the server said to a commit.
pub enum CommitAnswer {
    Committed(Box<CommitTableResponse>),
    /// 409: a requirement did not hold; nothing was committed.
    Conflict(String),
    /// 500, 502, 503, 504 or no answer after the request was sent: the commit may or may
    /// not have happened.
    Unknown(String),
}

#[derive(Deserialize)]
struct ServerConfig {
    #[serde(default)]
    defaults: HashMap<String, String>,
    #[serde(default)]
    overrides: HashMap<String, String>,
}

impl RestApi {
    /// Reads the server's configuration for `props` (`uri`, `warehouse`, `header.*`).
    pub async fn connect(props: &HashMap<String, String>, token: Option<String>) -> Result<Self> {
        let uri = props.get("uri").map(String::as_str).unwrap_or_default();
        let mut api = Self {
            http: reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .build()
                .map_err(|e| unexpected(format!("cannot build an HTTP client: {e}")))?,
            base: versioned(uri, None)?,
            headers: extra_headers(props)?,
            props: props.clone(),
            token: RwLock::new(token),
        };
        let mut url = api.base.join_segments(&["config"]);
        if let Some(warehouse) = props.get("warehouse") {
            url.query_pairs_mut().append_pair("warehouse", warehouse);
        }
        let response = api.send(api.request(Method::GET, url)).await?;
        if response.status() != StatusCode::OK {
            return Err(unexpected_answer("reading the catalog's configuration", response).await);
        }
        let config: ServerConfig = json(response).await?;
        let mut merged = config.defaults;
        merged.extend(props.clone());
        merged.extend(config.overrides);
        let uri = merged.get("uri").map(String::as_str).unwrap_or(uri);
        api.base = versioned(uri, merged.get("prefix").map(String::as_str))?;
        api.props = merged;
        Ok(api)
    }

    pub fn set_token(&self, token: String) {
        *self.token.write().unwrap_or_else(|e| e.into_inner()) = Some(token);
    }

    pub async fn load_table(&self, ident: &TableIdent) -> Result<TableAnswer> {
        let response = self
            .send(self.request(Method::GET, self.table_url(ident)))
            .await?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => {
                return Err(Error::new(
                    ErrorKind::TableNotFound,
                    format!("table {ident} does not exist"),
                ));
            }
            _ => return Err(unexpected_answer("loading a table", response).await),
        }
        let result: LoadTableResult = json(response).await?;
        let location = result.metadata.location().to_string();
        let file_io_props =
            self.table_file_io_props(&location, result.config, result.storage_credentials);
        Ok(TableAnswer {
            metadata: result.metadata,
            metadata_location: result.metadata_location,
            file_io_props,
        })
    }

    /// Sends `changes` as one `CommitTableRequest`; the server checks the requirements.
    pub async fn commit(&self, ident: &TableIdent, changes: &TableChanges) -> Result<CommitAnswer> {
        let body = CommitTableRequest {
            identifier: Some(ident.clone()),
            requirements: changes.requirements.clone(),
            updates: changes.updates.clone(),
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| unexpected(format!("cannot encode the commit: {e}")))?;
        let request = self
            .request(Method::POST, self.table_url(ident))
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) if e.is_connect() => return Err(transport_error(e)),
            Err(e) => return Ok(CommitAnswer::Unknown(e.without_url().to_string())),
        };
        let status = response.status();
        match status.as_u16() {
            200 => Ok(CommitAnswer::Committed(Box::new(json(response).await?))),
            409 => Ok(CommitAnswer::Conflict(server_message(response).await)),
            500 | 502 | 503 | 504 => Ok(CommitAnswer::Unknown(format!(
                "HTTP {status}: {}",
                server_message(response).await
            ))),
            _ => Err(unexpected_answer("committing", response).await),
        }
    }

    /// The table's storage properties, least specific first: the catalog's, the table's
    /// `config`, the credential whose prefix is the longest one of `location`.
    fn table_file_io_props(
        &self,
        location: &str,
        config: HashMap<String, String>,
        credentials: Option<Vec<StorageCredential>>,
    ) -> HashMap<String, String> {
        let mut props = self.props.clone();
        props.extend(config);
        let best = credentials
            .unwrap_or_default()
            .into_iter()
            .filter(|c| location.starts_with(&c.prefix))
            .max_by_key(|c| c.prefix.len());
        if let Some(credential) = best {
            props.extend(credential.config);
        }
        props
    }

    fn table_url(&self, ident: &TableIdent) -> Url {
        let namespace = ident.namespace().to_url_string();
        self.base
            .join_segments(&["namespaces", &namespace, "tables", ident.name()])
    }

    fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, url).headers(self.headers.clone());
        if let Some(token) = self
            .token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
        {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        request
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        request.send().await.map_err(transport_error)
    }
}

/// An answer the call does not expect, with the server's message (never the
/// headers: they may echo the token). A 401 keeps "401 Unauthorized" in its text,
/// which is what makes the catalog renew its token.
async fn unexpected_answer(what: &str, response: reqwest::Response) -> Error {
    let status = response.status();
    let message = server_message(response).await;
    let kind = match status {
        StatusCode::NOT_FOUND => ErrorKind::TableNotFound,
        _ => ErrorKind::Unexpected,
    };
    Error::new(
        kind,
        format!("REST catalog: {what}: HTTP {status}: {message}"),
    )
}

/// `{uri}/v1[/{prefix}]`, as a URL whose path segments can be appended to.
fn versioned(uri: &str, prefix: Option<&str>) -> Result<Url> {
    let mut url = Url::parse(uri.trim_end_matches('/'))
        .map_err(|e| Error::new(ErrorKind::DataInvalid, format!("catalog.uri: {e}")))?;
    url.path_segments_mut()
        .map_err(|_| Error::new(ErrorKind::DataInvalid, "catalog.uri cannot have a path"))?
        .pop_if_empty()
        .push("v1")
        .extend(prefix.into_iter().flat_map(|p| p.split('/')));
    Ok(url)
}

trait JoinSegments {
    fn join_segments(&self, segments: &[&str]) -> Url;
}

impl JoinSegments for Url {
    /// This URL with `segments` appended, each percent-encoded as one segment.
    fn join_segments(&self, segments: &[&str]) -> Url {
        let mut url = self.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.extend(segments);
        }
        url
    }
}

fn extra_headers(props: &HashMap<String, String>) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    for (key, value) in props {
        let Some(name) = key.strip_prefix("header.") else {
            continue;
        };
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Error::new(ErrorKind::DataInvalid, format!("{key}: not a header name")))?;
        let value = HeaderValue::from_str(value).map_err(|_| {
            Error::new(ErrorKind::DataInvalid, format!("{key}: not a header value"))
        })?;
        headers.insert(name, value);
    }
    Ok(headers)
}

async fn json<T: serde::de::DeserializeOwned>(response: reqwest::Response) -> Result<T> {
    let bytes = response.bytes().await.map_err(transport_error)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| unexpected(format!("unexpected answer from the REST catalog: {e}")))
}

/// The `message` of an Iceberg `ErrorResponse`, or the start of the body.
async fn server_message(response: reqwest::Response) -> String {
    #[derive(Deserialize)]
    struct ErrorResponse {
        error: ErrorModel,
    }
    #[derive(Deserialize)]
    struct ErrorModel {
        message: String,
    }
    let bytes = response.bytes().await.unwrap_or_default();
    match serde_json::from_slice::<ErrorResponse>(&bytes) {
        Ok(answer) => answer.error.message,
        Err(_) => String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
    }
}

fn transport_error(e: reqwest::Error) -> Error {
    unexpected(format!(
        "error sending request to the REST catalog: {}",
        e.without_url()
    ))
}

fn unexpected(message: String) -> Error {
    Error::new(ErrorKind::Unexpected, message)
}
