//! The process's counters, in Prometheus' text format (`GET /metrics`).
//!
//! One process-wide registry ([`metrics`]): statements are counted where they end
//! (`ops::statements`), commits where the catalog answers them. Gauges that describe
//! the cluster (jobs, tasks, executors) are read from the scheduler when scraped.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Upper bounds (seconds) of the statement latency histogram's buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

#[derive(Default)]
pub struct Metrics {
    /// Ended statements by (kind, status).
    statements: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// Statement latency by kind.
    latency: Mutex<BTreeMap<&'static str, Histogram>>,
    rows_returned: AtomicU64,
    bytes_returned: AtomicU64,
    rows_written: AtomicU64,
    bytes_written: AtomicU64,
    files_written: AtomicU64,
    commits: AtomicU64,
    commit_conflicts: AtomicU64,
    commit_retries: AtomicU64,
    /// Statements that waited for admission and gave up.
    admission_rejections: AtomicU64,
}

#[derive(Default)]
struct Histogram {
    counts: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::default);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// What the cluster looks like when scraped.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterGauges {
    pub executors_alive: usize,
    pub jobs_running: usize,
    pub tasks_running: usize,
    /// Bytes of stage outputs held in memory (or reserved for them).
    pub shuffle_memory_bytes: usize,
}

/// What the statement registry looks like when scraped.
#[derive(Debug, Default, Clone, Copy)]
pub struct StatementGauges {
    pub running: usize,
    pub queued: usize,
    pub limit: usize,
}

impl Metrics {
    pub fn statement_ended(&self, kind: &'static str, status: &'static str, took: Duration) {
        if let Ok(mut statements) = self.statements.lock() {
            *statements.entry((kind, status)).or_default() += 1;
        }
        if let Ok(mut latency) = self.latency.lock() {
            let histogram = latency.entry(kind).or_default();
            let seconds = took.as_secs_f64();
            for (count, bound) in histogram.counts.iter_mut().zip(LATENCY_BUCKETS) {
                if seconds <= bound {
                    *count += 1;
                }
            }
            histogram.count += 1;
            histogram.sum += seconds;
        }
    }

    pub fn returned(&self, rows: u64, bytes: u64) {
        self.rows_returned.fetch_add(rows, Ordering::Relaxed);
        self.bytes_returned.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn written(&self, rows: u64, bytes: u64, files: u64) {
        self.rows_written.fetch_add(rows, Ordering::Relaxed);
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
        self.files_written.fetch_add(files, Ordering::Relaxed);
    }

    /// A commit the catalog accepted.
    pub fn committed(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// A commit the catalog refused because the table had changed.
    pub fn commit_conflict(&self) {
        self.commit_conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// A commit tried again (after a conflict or a lost answer).
    pub fn commit_retried(&self) {
        self.commit_retries.fetch_add(1, Ordering::Relaxed);
    }

    pub fn admission_rejected(&self) {
        self.admission_rejections.fetch_add(1, Ordering::Relaxed);
    }

    /// Everything, in Prometheus' text exposition format.
    pub fn render(&self, cluster: ClusterGauges, statements: StatementGauges) -> String {
        let mut out = Exposition::default();
        out.family(
            "floe_statements_total",
            "counter",
            "Statements ended, by kind and status.",
        );
        if let Ok(counts) = self.statements.lock() {
            for ((kind, status), count) in counts.iter() {
                out.sample(
                    "floe_statements_total",
                    &[("kind", kind), ("status", status)],
                    *count as f64,
                );
            }
        }
        out.family(
            "floe_statement_duration_seconds",
            "histogram",
            "Statement latency, from arrival to its last row or its answer.",
        );
        if let Ok(latency) = self.latency.lock() {
            for (kind, histogram) in latency.iter() {
                histogram.render(&mut out, kind);
            }
        }
        let counters: [(&str, &str, &AtomicU64); 9] = [
            (
                "floe_rows_returned_total",
                "Rows streamed to clients.",
                &self.rows_returned,
            ),
            (
                "floe_bytes_returned_total",
                "Bytes of Arrow data streamed to clients.",
                &self.bytes_returned,
            ),
            (
                "floe_rows_written_total",
                "Rows committed to tables.",
                &self.rows_written,
            ),
            (
                "floe_bytes_written_total",
                "Bytes of data files committed to tables.",
                &self.bytes_written,
            ),
            (
                "floe_files_written_total",
                "Data files committed to tables.",
                &self.files_written,
            ),
            (
                "floe_commits_total",
                "Commits the catalog accepted.",
                &self.commits,
            ),
            (
                "floe_commit_conflicts_total",
                "Commits the catalog refused because the table had changed.",
                &self.commit_conflicts,
            ),
            (
                "floe_commit_retries_total",
                "Commits tried again.",
                &self.commit_retries,
            ),
            (
                "floe_admission_rejections_total",
                "Statements refused after waiting for admission.",
                &self.admission_rejections,
            ),
        ];
        for (name, help, value) in counters {
            out.family(name, "counter", help);
            out.sample(name, &[], value.load(Ordering::Relaxed) as f64);
        }
        let gauges = [
            (
                "floe_statements_running",
                "Statements admitted and not ended.",
                statements.running,
            ),
            (
                "floe_statements_queued",
                "Statements waiting for admission.",
                statements.queued,
            ),
            (
                "floe_statements_limit",
                "Statements that may run at once (max_concurrent_statements).",
                statements.limit,
            ),
            (
                "floe_executors_alive",
                "Executors registered with the scheduler.",
                cluster.executors_alive,
            ),
            (
                "floe_jobs_running",
                "Ballista jobs running.",
                cluster.jobs_running,
            ),
            (
                "floe_tasks_running",
                "Tasks running on executors.",
                cluster.tasks_running,
            ),
            (
                "floe_shuffle_memory_bytes",
                "Bytes of stage outputs in-process executors hold in memory (shuffle_memory_mb).",
                cluster.shuffle_memory_bytes,
            ),
        ];
        for (name, help, value) in gauges {
            out.family(name, "gauge", help);
            out.sample(name, &[], value as f64);
        }
        out.text
    }
}

impl Histogram {
    fn render(&self, out: &mut Exposition, kind: &str) {
        let name = "floe_statement_duration_seconds";
        for (count, bound) in self.counts.iter().zip(LATENCY_BUCKETS) {
            let le = bound.to_string();
            out.sample(
                &format!("{name}_bucket"),
                &[("kind", kind), ("le", &le)],
                *count as f64,
            );
        }
        out.sample(
            &format!("{name}_bucket"),
            &[("kind", kind), ("le", "+Inf")],
            self.count as f64,
        );
        out.sample(&format!("{name}_sum"), &[("kind", kind)], self.sum);
        out.sample(
            &format!("{name}_count"),
            &[("kind", kind)],
            self.count as f64,
        );
    }
}

/// Text in Prometheus' exposition format.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            let labels: Vec<String> = labels
                .iter()
                .map(|(key, value)| format!("{key}=\"{}\"", escaped(value)))
                .collect();
            let _ = write!(self.text, "{{{}}}", labels.join(","));
        }
        let _ = writeln!(self.text, " {value}");
    }
}

fn escaped(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
