//! Where table files live, chosen per path by its scheme: local files (`file:`, or a
//! bare path) through iceberg's own local storage, S3-compatible object storage (`s3:`,
//! `s3a:`, `s3n:`) through iceberg-storage-opendal. The same factory serves the
//! catalogs on the coordinator and the FileIOs executors rebuild from shipped
//! properties, so a table reads and writes alike everywhere. Vended credentials that
//! expire are renewed through their lease (`credentials`).
//!
//! iceberg's `Storage` cannot list a directory; [`list_files`] can, for table
//! maintenance, on the same two backends.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileIO, FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorageFactory, OutputFile,
    Storage, StorageConfig, StorageFactory,
};
use iceberg_storage_opendal::{CustomAwsCredentialLoader, OpenDalStorageFactory};
use serde::{Deserialize, Serialize};

use super::credentials::LeasedS3Credentials;

/// Builds [`FloeStorage`]s.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FloeStorageFactory;

#[typetag::serde]
impl StorageFactory for FloeStorageFactory {
    fn build(&self, config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(FloeStorage {
            config: config.clone(),
            local: OnceLock::new(),
            s3: OnceLock::new(),
        }))
    }
}

/// Dispatches each call to the backend of its path's scheme; backends are built on
/// first use, once per FileIO.
#[derive(Serialize, Deserialize)]
pub struct FloeStorage {
    config: StorageConfig,
    #[serde(skip)]
    local: OnceLock<Arc<dyn Storage>>,
    #[serde(skip)]
    s3: OnceLock<Arc<dyn Storage>>,
}

/// Property names only: the values may be credentials.
impl std::fmt::Debug for FloeStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<_> = self.config.props().keys().collect();
        keys.sort();
        f.debug_struct("FloeStorage").field("props", &keys).finish()
    }
}

impl FloeStorage {
    fn backend(&self, path: &str) -> iceberg::Result<&Arc<dyn Storage>> {
        match scheme(path) {
            "" | "file" => built(&self.local, || LocalFsStorageFactory.build(&self.config)),
            "s3" | "s3a" | "s3n" => built(&self.s3, || {
                let leased = LeasedS3Credentials::for_props(self.config.props())?;
                OpenDalStorageFactory::S3 {
                    customized_credential_load: leased.map(CustomAwsCredentialLoader::new),
                }
                .build(&self.config)
            }),
            other => Err(iceberg::Error::new(
                iceberg::ErrorKind::FeatureUnsupported,
                format!("storage scheme '{other}:' is not supported (file or s3)"),
            )),
        }
    }
}

fn built(
    cell: &OnceLock<Arc<dyn Storage>>,
    build: impl FnOnce() -> iceberg::Result<Arc<dyn Storage>>,
) -> iceberg::Result<&Arc<dyn Storage>> {
    if let Some(storage) = cell.get() {
        return Ok(storage);
    }
    let storage = build()?;
    Ok(cell.get_or_init(|| storage))
}

/// A path's URL scheme, lower-cased; "" for a bare path.
pub fn scheme(path: &str) -> &str {
    match path.split_once(':') {
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            scheme
        }
        _ => "",
    }
}

#[typetag::serde]
#[async_trait]
impl Storage for FloeStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        self.backend(path)?.exists(path).await
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        self.backend(path)?.metadata(path).await
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.backend(path)?.read(path).await
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        self.backend(path)?.reader(path).await
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.backend(path)?.write(path, bs).await
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        self.backend(path)?.writer(path).await
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        self.backend(path)?.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        self.backend(path)?.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        // Each backend deletes its own paths (in batches, on object storage).
        let paths: Vec<String> = paths.collect().await;
        let mut by_scheme: HashMap<String, Vec<String>> = HashMap::new();
        for path in paths {
            by_scheme
                .entry(scheme(&path).to_string())
                .or_default()
                .push(path);
        }
        for paths in by_scheme.into_values() {
            let backend = self.backend(&paths[0])?;
            backend
                .delete_stream(futures::stream::iter(paths).boxed())
                .await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        self.backend(path)?.new_input(path)
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        self.backend(path)?.new_output(path)
    }
}

/// A file found by [`list_files`]: its full path, in the form of the listed location,
/// and its last change in milliseconds since the epoch.
pub type Listed = (String, i64);

/// Every file below the directory `location` (local or S3), reached with the storage
/// properties of `file_io`.
pub async fn list_files(file_io: &FileIO, location: &str) -> iceberg::Result<Vec<Listed>> {
    let location = location.trim_end_matches('/');
    match scheme(location) {
        "" | "file" => {
            let root = location
                .strip_prefix("file://")
                .or_else(|| location.strip_prefix("file:"))
                .unwrap_or(location);
            let root = std::path::PathBuf::from(root);
            tokio::task::spawn_blocking(move || list_local(&root))
                .await
                .map_err(|e| {
                    iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("listing: {e}"))
                })
        }
        "s3" | "s3a" | "s3n" => list_s3(file_io.config().props(), location).await,
        other => Err(iceberg::Error::new(
            iceberg::ErrorKind::FeatureUnsupported,
            format!("listing files under '{other}:' is not supported (file or s3)"),
        )),
    }
}

fn list_local(root: &std::path::Path) -> Vec<Listed> {
    let mut files = Vec::new();
    let mut directories = vec![root.to_path_buf()];
    while let Some(directory) = directories.pop() {
        let Ok(entries) = std::fs::read_dir(&directory) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                directories.push(entry.path());
            } else if let Some(path) = entry.path().to_str() {
                let modified = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(i64::MAX, |d| d.as_millis() as i64);
                files.push((path.to_string(), modified));
            }
        }
    }
    files
}

/// Lists `location` (`s3://bucket/prefix`) with the same endpoint, region, addressing
/// and credentials (vended ones renewed through their lease) as the table's reads.
/// A file whose time the store does not give counts as changed just now.
async fn list_s3(props: &HashMap<String, String>, location: &str) -> iceberg::Result<Vec<Listed>> {
    let unexpected = |what: String| iceberg::Error::new(iceberg::ErrorKind::Unexpected, what);
    let (scheme_and_bucket, prefix) = match location.split_once("://") {
        Some((scheme, rest)) => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            ((scheme, bucket), prefix)
        }
        None => return Err(unexpected(format!("not an S3 location: {location}"))),
    };
    let (scheme, bucket) = scheme_and_bucket;
    let operator = s3_operator(props, bucket)?;
    let directory = match prefix {
        "" => String::new(),
        prefix => format!("{prefix}/"),
    };
    let entries = operator
        .list_with(&directory)
        .recursive(true)
        .await
        .map_err(|e| unexpected(format!("listing {location}: {e}")))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(i64::MAX, |d| d.as_millis() as i64);
    Ok(entries
        .into_iter()
        .filter(|entry| !entry.path().ends_with('/'))
        .map(|entry| {
            let modified = entry
                .metadata()
                .last_modified()
                .map_or(now, |t| t.into_inner().as_millisecond());
            (format!("{scheme}://{bucket}/{}", entry.path()), modified)
        })
        .collect())
}

fn s3_operator(
    props: &HashMap<String, String>,
    bucket: &str,
) -> iceberg::Result<opendal::Operator> {
    use iceberg::io::{
        CLIENT_REGION, S3_ACCESS_KEY_ID, S3_ALLOW_ANONYMOUS, S3_DISABLE_CONFIG_LOAD,
        S3_DISABLE_EC2_METADATA, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION,
        S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN,
    };
    let prop = |key: &str| props.get(key).map(String::as_str);
    let truthy = |key: &str| {
        prop(key).is_some_and(|v| ["true", "t", "1", "on"].contains(&v.to_lowercase().as_str()))
    };
    let mut builder = opendal::services::S3::default().bucket(bucket);
    for (key, set) in [
        (
            S3_ENDPOINT,
            opendal::services::S3::endpoint as fn(_, &str) -> _,
        ),
        (S3_REGION, opendal::services::S3::region),
        (CLIENT_REGION, opendal::services::S3::region),
        (S3_ACCESS_KEY_ID, opendal::services::S3::access_key_id),
        (
            S3_SECRET_ACCESS_KEY,
            opendal::services::S3::secret_access_key,
        ),
        (S3_SESSION_TOKEN, opendal::services::S3::session_token),
    ] {
        if let Some(value) = prop(key) {
            builder = set(builder, value);
        }
    }
    // Iceberg's default is virtual-host addressing, opendal's path style.
    if !truthy(S3_PATH_STYLE_ACCESS) {
        builder = builder.enable_virtual_host_style();
    }
    if truthy(S3_ALLOW_ANONYMOUS) {
        builder = builder.skip_signature();
    }
    if truthy(S3_DISABLE_EC2_METADATA) {
        builder = builder.disable_ec2_metadata();
    }
    if truthy(S3_DISABLE_CONFIG_LOAD) {
        builder = builder.disable_config_load();
    }
    if let Some(leased) = LeasedS3Credentials::for_props(props)? {
        builder = builder
            .credential_provider_chain(reqsign_core::ProvideCredentialChain::new().push(leased));
    }
    Ok(opendal::Operator::new(builder)
        .map_err(|e| {
            iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("S3 listing: {e}"))
        })?
        .finish())
}
