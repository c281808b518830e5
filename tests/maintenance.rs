//! Table maintenance: how `remove_orphan_files` tells a listed file from a referenced one.

use floe::table::maintenance::comparable;

#[test]
fn orphan_removal_compares_each_object_under_one_spelling() {
    // Hadoop's names for S3 are the same objects: a file referenced as s3a:// and
    // listed as s3:// must not look unreferenced.
    for spelled in ["s3a://b/t/data/f.parquet", "s3n://b/t/data/f.parquet"] {
        assert_eq!(comparable(spelled), "s3://b/t/data/f.parquet");
    }
    assert_eq!(comparable("file:///w/t/f.parquet"), "/w/t/f.parquet");
    assert_eq!(comparable("file:/w/t/f.parquet"), "/w/t/f.parquet");
    assert_eq!(comparable("/w/t/f.parquet"), "/w/t/f.parquet");
    assert_eq!(comparable("gs://b/t"), "gs://b/t");
}
