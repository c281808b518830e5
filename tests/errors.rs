//! Error classification and the executor → coordinator error channel.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use floe::cluster::failed_job_error;
use floe::error::{ErrorKind, FloeError};

#[test]
fn user_errors_in_data_are_invalid_argument() {
    let cases = [
        DataFusionError::ArrowError(Box::new(ArrowError::DivideByZero), None),
        DataFusionError::ArrowError(
            Box::new(ArrowError::CastError("'abc' to Int32".into())),
            None,
        ),
        DataFusionError::Context(
            "projection".into(),
            Box::new(DataFusionError::ArrowError(
                Box::new(ArrowError::ArithmeticOverflow("1 + i64::MAX".into())),
                None,
            )),
        ),
    ];
    for error in cases {
        assert_eq!(FloeError::from(error).kind, ErrorKind::InvalidArgument);
    }
    // A function refusing its argument, and a pattern that does not parse.
    let refused = DataFusionError::Execution("Month value '13' is out of range".into());
    assert_eq!(FloeError::from(refused).kind, ErrorKind::InvalidArgument);
    let unclosed = String::from("(");
    let pattern = regex::Regex::new(&unclosed).expect_err("not a pattern");
    let syntax = (regex_syntax::Parser::new().parse(&unclosed)).expect_err("not a pattern");
    let compiled = ArrowError::ComputeError("Regular expression did not compile: (".into());
    let pattern_errors = [
        DataFusionError::External(Box::new(pattern)),
        DataFusionError::External(Box::new(syntax)),
        DataFusionError::ArrowError(Box::new(compiled), None),
    ];
    for error in pattern_errors {
        assert_eq!(FloeError::from(error).kind, ErrorKind::InvalidArgument);
    }
    let internal = DataFusionError::Internal("a bug".into());
    assert_eq!(FloeError::from(internal).kind, ErrorKind::Internal);
    let memory = DataFusionError::ResourcesExhausted("memory".into());
    assert_eq!(FloeError::from(memory).kind, ErrorKind::ResourceExhausted);
}

#[test]
fn floe_errors_keep_their_kind_inside_datafusion_errors() {
    let inner = FloeError::aborted("commit conflict; retrying is safe");
    let wrapped = DataFusionError::Context("writing".into(), Box::new(inner.clone().into()));
    let back = FloeError::from(wrapped);
    assert_eq!((back.kind, back.message), (inner.kind, inner.message));
}

/// Ballista wraps a task's report in its own text, Debug-escaped on some paths.
#[test]
fn task_reports_survive_ballistas_formatting() {
    let error = FloeError::invalid("NULL value in NOT NULL column 'id' \"quoted\" \\ ünï\n");
    let report = error.task_report();
    let plain = format!(
        "Job failed due to stage 1 failed: Task failed: DataFusionError(External({report}))\n"
    );
    let escaped = format!("Stage 1 has failed 4 times, most recent failure reason: {plain:?}");
    for text in [plain, escaped] {
        let back = FloeError::from_task_report(&text).expect("a report");
        assert_eq!(back.kind, ErrorKind::InvalidArgument);
        assert_eq!(back.message, error.message);
    }
    assert!(FloeError::from_task_report("Task failed: Cancelled").is_none());
    assert!(FloeError::from_task_report("[floe-error bogus 41]").is_none());
    assert!(FloeError::from_task_report("[floe-error internal 4]").is_none());
}

/// How a failed job's status text (ballista-scheduler's "Job failed due to stage {id}
/// failed: {error}\n") reaches the client.
#[test]
fn failed_jobs_keep_what_the_user_must_know() {
    let stage_failed = |error: &str| format!("Job failed due to stage 2 failed: {error}\n");
    // The scheduler dropped an executor before Floe noticed, and cancelled the
    // survivors' tasks of the rolled-back stages: a retry is safe.
    let lost = failed_job_error(&stage_failed(
        "Task failed due to runtime execution error: Cancelled",
    ));
    assert_eq!(lost.kind, ErrorKind::Unavailable);
    assert!(
        lost.message.starts_with("lost executor"),
        "{}",
        lost.message
    );
    assert!(
        lost.message.contains("retrying is safe"),
        "{}",
        lost.message
    );

    let cancelled = failed_job_error("Cancelled");
    assert_eq!(cancelled.kind, ErrorKind::Cancelled);

    let reported = FloeError::invalid("NULL value in NOT NULL column 'id'");
    let back = failed_job_error(&stage_failed(&format!(
        "Task failed: DataFusionError(External({}))",
        reported.task_report()
    )));
    assert_eq!(back.kind, ErrorKind::InvalidArgument);
    assert_eq!(back.message, reported.message);

    let other = failed_job_error(&stage_failed("Stage 2 has failed 4 times"));
    assert_eq!(other.kind, ErrorKind::Internal);
    assert_eq!(
        other.message,
        "Job failed due to stage 2 failed: Stage 2 has failed 4 times"
    );
}
