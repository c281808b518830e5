//! The statement registry: admission, cancellation by id, and what it counts.

use std::time::Duration;

use floe::error::{ErrorKind, FloeError};
use floe::ops::metrics::{ClusterGauges, metrics};
use floe::ops::statements::{Statements, statement_kind};

#[tokio::test]
async fn a_full_server_queues_then_refuses_and_kill_and_show_still_get_in() {
    let statements = Statements::new(1, Duration::from_millis(200));
    let first = statements.admit("ann", "SELECT 1").await.expect("a place");
    let refused = statements
        .admit("bob", "SELECT 2")
        .await
        .err()
        .expect("full");
    assert_eq!(refused.kind, ErrorKind::ResourceExhausted);
    // Relief statements need no place.
    let show = statements
        .admit("bob", "SHOW STATEMENTS")
        .await
        .expect("show");
    let kill = statements.admit("bob", "KILL 1").await.expect("kill");
    let listed: Vec<(u64, String)> = statements
        .list()
        .into_iter()
        .map(|s| (s.id, s.user))
        .collect();
    assert_eq!(listed[0], (first.id(), "ann".to_string()));
    assert_eq!(statements.gauges().running, 3);
    drop((show, kill));

    // A waiting statement gets the place the first one frees.
    let waiting = {
        let statements = statements.clone();
        tokio::spawn(async move { statements.admit("bob", "INSERT INTO t VALUES (1)").await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(statements.gauges().queued, 1);
    first.end(Ok(1));
    let second = waiting.await.expect("joined").expect("admitted");
    second.end(Err(&FloeError::aborted("lost a race")));
    assert_eq!(statements.gauges().running, 0);
}

#[tokio::test]
async fn only_the_owner_or_an_administrator_may_cancel() {
    let statements = Statements::new(0, Duration::from_secs(1));
    let running = statements.admit("ann", "SELECT 1").await.expect("admitted");
    let id = running.id();
    let denied = statements
        .cancel(id, |owner| owner == "bob")
        .expect_err("not bob's");
    assert_eq!(denied.kind, ErrorKind::NotFound);
    assert!(!running.scope().is_cancelled());
    statements
        .cancel(id, |owner| owner == "ann")
        .expect("ann's own");
    assert!(running.scope().is_cancelled());
}

#[test]
fn statements_are_counted_by_their_first_keyword() {
    assert_eq!(statement_kind("  (SELECT 1)"), "query");
    assert_eq!(
        statement_kind("with x as (select 1) select * from x"),
        "query"
    );
    assert_eq!(statement_kind("INSERT OVERWRITE t SELECT 1"), "insert");
    assert_eq!(
        statement_kind("merge into t using s on true when matched then delete"),
        "merge"
    );
    assert_eq!(statement_kind("GRANT ALL"), "other");
}

#[test]
fn the_exposition_is_prometheus_text() {
    metrics().statement_ended("query", "ok", Duration::from_millis(30));
    let text = metrics().render(ClusterGauges::default(), Default::default());
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix} in\n{text}"))
            .to_string()
    };
    assert!(
        line("floe_statements_total{kind=\"query\",status=\"ok\"} ")
            .ends_with(|c: char| c.is_ascii_digit())
    );
    // 30 ms is above the 25 ms bucket and within the 50 ms one.
    let le_25 = line("floe_statement_duration_seconds_bucket{kind=\"query\",le=\"0.025\"}");
    let le_50 = line("floe_statement_duration_seconds_bucket{kind=\"query\",le=\"0.05\"}");
    let count = |l: &str| {
        l.rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(-1.0)
    };
    assert!(count(&le_50) > count(&le_25));
    assert!(text.contains("# TYPE floe_statement_duration_seconds histogram"));
}
