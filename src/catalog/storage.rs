//! Where table files live, chosen per path by its scheme: local files (`file:`, or a
//! bare path) through iceberg's own local storage, S3-compatible object storage (`s3:`,
//! `s3a:`, `s3n:`) through iceberg-storage-opendal. The same factory serves the
//! catalogs on the coordinator and the FileIOs executors rebuild from shipped
//! properties, so a table reads and writes alike everywhere. Vended credentials that
//! expire are renewed through their lease (`credentials`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorageFactory, OutputFile, Storage,
    StorageConfig, StorageFactory,
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
