//! Shared builders for tests.

use std::sync::Arc;

use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::{DataContentType, DataFileFormat, NestedField, PrimitiveType, Schema, Type};

pub fn schema() -> Arc<Schema> {
    Arc::new(
        Schema::builder()
            .with_schema_id(3)
            .with_fields(vec![
                Arc::new(NestedField::required(
                    1,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "name",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    3,
                    "price",
                    Type::Primitive(PrimitiveType::Double),
                )),
            ])
            .build()
            .expect("valid schema"),
    )
}

pub fn task(path: &str, length: u64) -> FileScanTask {
    FileScanTask {
        file_size_in_bytes: length,
        start: 0,
        length,
        record_count: Some(length / 10),
        data_file_path: path.to_string(),
        data_file_format: DataFileFormat::Parquet,
        schema: schema(),
        project_field_ids: vec![1, 2, 3],
        predicate: None,
        deletes: vec![],
        partition: None,
        partition_spec: None,
        name_mapping: None,
        case_sensitive: true,
    }
}

pub fn position_delete(path: &str) -> FileScanTaskDeleteFile {
    FileScanTaskDeleteFile {
        file_path: path.to_string(),
        file_size_in_bytes: 123,
        file_type: DataContentType::PositionDeletes,
        partition_spec_id: 0,
        equality_ids: None,
    }
}
