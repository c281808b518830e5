//! Scan task grouping: deterministic, complete, balanced.

use floe::table::scan::group_tasks;

use crate::support::task;

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
    let expected = paths(&group_tasks(tasks, 3));
    assert_eq!(paths(&group_tasks(reversed, 3)), expected);
    assert_eq!(paths(&group_tasks(rotated, 3)), expected);
}

#[test]
fn every_task_lands_in_exactly_one_of_min_target_and_tasks_groups() {
    let tasks: Vec<_> = (0..5)
        .map(|i| task(&format!("f{i}.parquet"), 100))
        .collect();
    let groups = group_tasks(tasks.clone(), 8);
    assert_eq!(groups.len(), 5, "never more groups than tasks");
    let groups = group_tasks(tasks, 2);
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
    let groups = group_tasks(vec![], 4);
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
    let loads: Vec<u64> = group_tasks(tasks, 2)
        .iter()
        .map(|g| g.iter().map(|t| t.length).sum())
        .collect();
    assert_eq!(loads.iter().sum::<u64>(), 2800);
    assert!(loads.iter().all(|l| *l == 1400), "loads {loads:?}");
}
