//! Scan task grouping: deterministic, complete, balanced; large files split in ranges.

use std::collections::HashMap;

use floe::table::scan::{Splitting, group_tasks};

use crate::support::{position_delete, task};

fn paths(groups: &[Vec<iceberg::scan::FileScanTask>]) -> Vec<Vec<String>> {
    groups
        .iter()
        .map(|g| g.iter().map(|t| t.data_file_path.clone()).collect())
        .collect()
}

#[test]
fn grouping_does_not_depend_on_planning_order() {
    let sizes = [500u64, 20, 300, 300, 80, 1000, 5, 640];
    let tasks: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| task(&format!("f{i}.parquet"), *s))
        .collect();
    let mut reversed = tasks.clone();
    reversed.reverse();
    let mut rotated = tasks.clone();
    rotated.rotate_left(3);
    let expected = paths(&group_tasks(tasks, 3, 0));
    assert_eq!(paths(&group_tasks(reversed, 3, 0)), expected);
    assert_eq!(paths(&group_tasks(rotated, 3, 0)), expected);
}

#[test]
fn every_task_lands_in_exactly_one_of_min_target_and_tasks_groups() {
    let tasks: Vec<_> = (0..5)
        .map(|i| task(&format!("f{i}.parquet"), 100))
        .collect();
    let groups = group_tasks(tasks.clone(), 8, 0);
    assert_eq!(groups.len(), 5, "never more groups than tasks");
    let groups = group_tasks(tasks, 2, 0);
    assert_eq!(groups.len(), 2);
    let mut all: Vec<String> = paths(&groups).concat();
    all.sort();
    assert_eq!(
        all,
        (0..5).map(|i| format!("f{i}.parquet")).collect::<Vec<_>>()
    );
}

#[test]
fn no_tasks_still_make_one_group() {
    let groups = group_tasks(vec![], 4, 0);
    assert_eq!(groups.len(), 1);
    assert!(groups[0].is_empty());
}

#[test]
fn groups_are_balanced_by_bytes() {
    let sizes = [1000u64, 900, 100, 100, 100, 100, 100, 100, 100, 100, 100];
    let tasks: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| task(&format!("f{i:02}.parquet"), *s))
        .collect();
    let loads: Vec<u64> = group_tasks(tasks, 2, 0)
        .iter()
        .map(|g| g.iter().map(|t| t.length).sum())
        .collect();
    assert_eq!(loads.iter().sum::<u64>(), 2800);
    assert!(loads.iter().all(|l| *l == 1400), "loads {loads:?}");
}

fn splitting(target_size: u64, open_file_cost: u64) -> Splitting {
    Splitting::of(&HashMap::from([
        (
            "read.split.target-size".to_string(),
            target_size.to_string(),
        ),
        (
            "read.split.open-file-cost".to_string(),
            open_file_cost.to_string(),
        ),
    ]))
}

#[test]
fn a_file_over_the_split_size_is_read_in_ranges_that_tile_it() {
    let pieces =
        splitting(128, 4).split(vec![task("big.parquet", 300), task("small.parquet", 100)]);
    let ranges: Vec<(u64, u64)> = pieces
        .iter()
        .filter(|t| t.data_file_path == "big.parquet")
        .map(|t| (t.start, t.length))
        .collect();
    assert_eq!(ranges, vec![(0, 128), (128, 128), (256, 44)]);
    let rows: u64 = pieces
        .iter()
        .filter(|t| t.data_file_path == "big.parquet")
        .map(|t| t.record_count.unwrap_or(0))
        .sum();
    assert_eq!(rows, 30, "the ranges' row counts add up to the file's");
    assert_eq!(pieces.len(), 4, "the small file stays whole");
}

#[test]
fn a_file_with_deletes_is_not_split() {
    let mut with_deletes = task("big.parquet", 300);
    with_deletes.deletes = vec![position_delete("d.parquet")];
    let pieces = splitting(128, 4).split(vec![with_deletes]);
    assert_eq!(pieces.len(), 1);
    assert_eq!((pieces[0].start, pieces[0].length), (0, 300));
}

#[test]
fn opening_a_file_counts_when_balancing() {
    // A 250-byte file and four 1-byte files in two groups: by bytes alone the tiny files
    // all join the second group; opening each costs 100, so one joins the big file.
    let tasks = || {
        let mut tasks = vec![task("big.parquet", 250)];
        tasks.extend((0..4).map(|i| task(&format!("tiny{i}.parquet"), 1)));
        tasks
    };
    let sizes = |groups: Vec<Vec<iceberg::scan::FileScanTask>>| -> Vec<usize> {
        groups.iter().map(Vec::len).collect()
    };
    assert_eq!(sizes(group_tasks(tasks(), 2, 0)), vec![1, 4]);
    assert_eq!(sizes(group_tasks(tasks(), 2, 100)), vec![2, 3]);
}
