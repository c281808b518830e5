//! Vended storage credentials that are renewed before they expire, also in the middle of
//! a long job on executors that never talk to the catalog.
//!
//! A REST catalog may hand out table-scoped credentials that expire
//! (`s3.session-token-expires-at-ms`). When the coordinator loads such a table it opens a
//! *lease*: an unguessable id, kept here, that stands for "this table's credentials from
//! this catalog". The id travels in the table's storage properties ([`LEASE_PROP`]) to
//! every FileIO built from them, on the coordinator and on executors (inside the plan).
//! Such a FileIO signs its S3 requests with [`LeasedS3Credentials`]: the credentials
//! shipped with it until they come close to expiring, then fresh ones, which the
//! coordinator gets by loading the table again and an executor gets by asking the
//! coordinator (a Flight action on the scheduler port, see `cluster::coordinator_service`).
//!
//! A lease ends when it has not been renewed for its credentials' lifetime plus
//! [`LEASE_GRACE`]; renewing an ended or unknown lease is refused.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use iceberg::io::{S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN};
use iceberg::{Error, ErrorKind, Result};
use iceberg_storage_opendal::{AwsCredential, ProvideCredential};

use crate::coordinator_link;

/// The storage property that names a table's credential lease.
pub const LEASE_PROP: &str = "floe.credential-lease";

/// The Flight action an executor sends the coordinator to renew a lease (body: the id;
/// answer: the table's storage properties as JSON).
pub const RENEW_ACTION: &str = "floe.renew-storage-credentials";

/// How long an unrenewed lease outlives its credentials.
const LEASE_GRACE: Duration = Duration::from_secs(600);

/// Credentials are renewed a third of their lifetime before they expire, but at least
/// [`MIN_RENEW_MARGIN`] and at most [`MAX_RENEW_MARGIN`] before.
const MAX_RENEW_MARGIN: Duration = Duration::from_secs(300);

/// The S3 signer (reqsign) refuses credentials that expire within 10 s of a request.
const MIN_RENEW_MARGIN: Duration = Duration::from_secs(15);

/// Fetches a table's current storage properties (fresh credentials).
pub type Renew = Arc<dyn Fn() -> BoxFuture<'static, Result<HashMap<String, String>>> + Send + Sync>;

struct Lease {
    renew: Renew,
    lifetime: Duration,
    last_used: Instant,
}

impl Lease {
    fn ended(&self) -> bool {
        self.last_used.elapsed() >= self.lifetime + LEASE_GRACE
    }
}

/// The leases this process holds, by id, and the id of each table's lease.
#[derive(Default)]
struct Leases {
    by_id: HashMap<String, Lease>,
    by_table: HashMap<String, String>,
}

static LEASES: LazyLock<Mutex<Leases>> = LazyLock::new(Mutex::default);

fn leases() -> std::sync::MutexGuard<'static, Leases> {
    LEASES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of the lease on `table`'s credentials (opened now, or the open one, kept
/// open), for credentials that expire at `expires`.
pub fn open_lease(table: &str, renew: Renew, expires: SystemTime) -> String {
    let lifetime = expires
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    let mut leases = leases();
    leases.by_id.retain(|_, lease| !lease.ended());
    let Leases { by_id, by_table } = &mut *leases;
    by_table.retain(|_, id| by_id.contains_key(id));
    let id = by_table
        .entry(table.to_string())
        .or_insert_with(|| {
            format!(
                "{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            )
        })
        .clone();
    by_id.insert(
        id.clone(),
        Lease {
            renew,
            lifetime,
            last_used: Instant::now(),
        },
    );
    id
}

/// The table's current storage properties for lease `id`: from the catalog if this
/// process holds the lease (the coordinator, and its in-process executors), else from
/// the coordinator.
pub async fn renew(id: &str) -> Result<HashMap<String, String>> {
    if let Some(renew) = renew_here(id) {
        return renew().await;
    }
    if !coordinator_link::is_set() {
        return Err(ended());
    }
    renew_at_coordinator(id).await
}

/// Renews a lease this process holds; `None` if it holds no such lease (or it ended).
pub fn renew_here(id: &str) -> Option<Renew> {
    let mut leases = leases();
    let lease = leases.by_id.get_mut(id)?;
    if lease.ended() {
        leases.by_id.remove(id);
        return None;
    }
    lease.last_used = Instant::now();
    Some(lease.renew.clone())
}

/// Asks the coordinator to renew lease `id`.
async fn renew_at_coordinator(id: &str) -> Result<HashMap<String, String>> {
    let failed = |e: String| {
        Error::new(
            ErrorKind::Unexpected,
            format!("renewing storage credentials: {e}"),
        )
    };
    let answers = coordinator_link::ask(RENEW_ACTION, id.to_string().into())
        .await
        .map_err(failed)?;
    let body = answers
        .first()
        .ok_or_else(|| failed("no answer".to_string()))?;
    serde_json::from_slice(body).map_err(|e| failed(e.to_string()))
}

fn ended() -> Error {
    Error::new(
        ErrorKind::Unexpected,
        "the table's storage credentials expired and their lease has ended",
    )
}

/// When the storage credentials expire: the earliest `…expires-at-ms` property
/// (`s3.session-token-expires-at-ms`, `adls.sas-token-expires-at-ms.<account>`,
/// `gcs.oauth2.token-expires-at`, all milliseconds since the epoch).
pub fn credentials_expiry(props: &HashMap<String, String>) -> Option<SystemTime> {
    props
        .iter()
        .filter(|(k, _)| k.contains("expires-at"))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .min()
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
}

/// The credentials in a table's storage properties.
struct Vended {
    credential: AwsCredential,
    expires: SystemTime,
    /// Renewed this long before `expires`.
    margin: Duration,
}

impl Vended {
    fn from_props(props: &HashMap<String, String>) -> Result<Self> {
        let get = |key: &str| props.get(key).cloned();
        let (Some(access_key_id), Some(secret_access_key)) =
            (get(S3_ACCESS_KEY_ID), get(S3_SECRET_ACCESS_KEY))
        else {
            return Err(Error::new(
                ErrorKind::Unexpected,
                "the catalog vended no S3 credentials for the table",
            ));
        };
        let expires = credentials_expiry(props).ok_or_else(|| {
            Error::new(
                ErrorKind::Unexpected,
                "vended credentials without an expiry",
            )
        })?;
        let millis = expires
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let expires_in = reqsign_core::time::Timestamp::from_millisecond(millis as i64).ok();
        let lifetime = expires
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        Ok(Self {
            credential: AwsCredential {
                access_key_id,
                secret_access_key,
                session_token: get(S3_SESSION_TOKEN),
                expires_in,
            },
            expires,
            margin: (lifetime / 3).clamp(MIN_RENEW_MARGIN, MAX_RENEW_MARGIN),
        })
    }

    fn due(&self) -> bool {
        SystemTime::now() + self.margin >= self.expires
    }
}

/// Signs S3 requests with a lease's credentials, renewing them before they expire.
pub struct LeasedS3Credentials {
    lease: String,
    current: tokio::sync::Mutex<Vended>,
}

impl std::fmt::Debug for LeasedS3Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedS3Credentials")
            .finish_non_exhaustive()
    }
}

impl LeasedS3Credentials {
    /// For the storage properties of a FileIO: `None` if they name no lease.
    pub fn for_props(props: &HashMap<String, String>) -> Result<Option<Self>> {
        let Some(lease) = props.get(LEASE_PROP) else {
            return Ok(None);
        };
        Ok(Some(Self {
            lease: lease.clone(),
            current: tokio::sync::Mutex::new(Vended::from_props(props)?),
        }))
    }
}

impl ProvideCredential for LeasedS3Credentials {
    type Credential = AwsCredential;

    async fn provide_credential(
        &self,
        _: &reqsign_core::Context,
    ) -> reqsign_core::Result<Option<AwsCredential>> {
        let mut current = self.current.lock().await;
        if current.due() {
            tracing::debug!("renewing vended storage credentials");
            let renewed = renew(&self.lease)
                .await
                .and_then(|props| {
                    let mut names: Vec<&String> = props.keys().collect();
                    names.sort();
                    tracing::debug!(?names, "renewed vended storage credentials");
                    Vended::from_props(&props)
                })
                .map_err(|e| {
                    reqsign_core::Error::credential_invalid(format!(
                        "cannot renew the table's storage credentials: {e}"
                    ))
                })?;
            *current = renewed;
        }
        Ok(Some(current.credential.clone()))
    }
}
