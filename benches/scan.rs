//! Scan benchmark: the same queries through Floe (Flight SQL → embedded Ballista →
//! Iceberg scan) and through plain DataFusion reading the same Parquet files directly,
//! in one run, reported as ratios.
//!
//!     cargo bench --bench scan            # FLOE_BENCH_ROWS, FLOE_BENCH_FILES, FLOE_BENCH_RUNS

use std::time::{Duration, Instant};

use arrow_flight::sql::client::FlightSqlServiceClient;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use floe::config::{ServeArgs, ServeConfig};
use futures::TryStreamExt;
use tonic::transport::Channel;

const QUERIES: &[(&str, &str)] = &[
    (
        "aggregate",
        "SELECT s, count(*) AS n, sum(v) AS total FROM t GROUP BY s ORDER BY s",
    ),
    ("selective", "SELECT count(*) AS n FROM t WHERE id < 1000"),
    ("rows", "SELECT id, v, s FROM t WHERE id % 100 = 0"),
];

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows = env("FLOE_BENCH_ROWS", 4_000_000);
    let files = env("FLOE_BENCH_FILES", 8);
    let runs = env("FLOE_BENCH_RUNS", 5);
    let dir = tempfile::tempdir()?;
    let flight_port = free_port();
    let config = ServeConfig::resolve(&ServeArgs {
        data_dir: Some(dir.path().to_path_buf()),
        flight_addr: Some(format!("127.0.0.1:{flight_port}")),
        scheduler_addr: Some(format!("127.0.0.1:{}", free_port())),
        ..Default::default()
    })?;
    tokio::spawn(floe::server::serve(config));
    let mut client = connect(flight_port).await?;

    run(
        &mut client,
        "CREATE TABLE t (id BIGINT, v DOUBLE, s STRING)",
    )
    .await?;
    let per_file = rows / files;
    for f in 0..files {
        let (lo, hi) = (f * per_file, (f + 1) * per_file - 1);
        run(
            &mut client,
            &format!("INSERT INTO t SELECT value, value * 0.5, concat('s', value % 100) FROM generate_series({lo}, {hi})"),
        )
        .await?;
    }

    let baseline = SessionContext::new_with_config(
        SessionConfig::new().with_target_partitions(floe::config::cpus()),
    );
    // Each write has its own directory under data/: give DataFusion the files.
    let files_written = parquet_files(&dir.path().join("warehouse/default/t/data"))?;
    let table = baseline
        .read_parquet(files_written, ParquetReadOptions::default())
        .await?;
    baseline.register_table("t", table.into_view())?;

    println!("{rows} rows in {files} Parquet files, median of {runs} runs");
    println!(
        "{:<10} {:>10} {:>14} {:>7}",
        "query", "floe ms", "datafusion ms", "ratio"
    );
    for (name, sql) in QUERIES {
        let floe = median(runs, || {
            let mut client = client.clone();
            async move { run(&mut client, sql).await.map(|_| ()) }
        })
        .await?;
        let df = median(runs, || async {
            baseline
                .sql(sql)
                .await?
                .collect()
                .await
                .map(|_| ())
                .map_err(Into::into)
        })
        .await?;
        println!(
            "{name:<10} {:>10.1} {:>14.1} {:>7.2}",
            ms(floe),
            ms(df),
            floe.as_secs_f64() / df.as_secs_f64()
        );
    }
    Ok(())
}

type BoxError = Box<dyn std::error::Error>;

fn parquet_files(dir: &std::path::Path) -> Result<Vec<String>, BoxError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files.extend(parquet_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            files.push(path.to_string_lossy().into_owned());
        }
    }
    Ok(files)
}

async fn connect(port: u16) -> Result<FlightSqlServiceClient<Channel>, BoxError> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match Channel::from_shared(format!("http://127.0.0.1:{port}"))?
            .connect()
            .await
        {
            Ok(channel) => return Ok(FlightSqlServiceClient::new(channel)),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Runs a statement through Flight SQL and reads every batch.
async fn run(
    client: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<Vec<RecordBatch>, BoxError> {
    let info = client.execute(sql.to_string(), None).await?;
    let mut batches = Vec::new();
    for endpoint in info.endpoint {
        let ticket = endpoint.ticket.ok_or("endpoint without ticket")?;
        let stream = client.do_get(ticket).await?;
        batches.extend(stream.try_collect::<Vec<_>>().await?);
    }
    Ok(batches)
}

async fn median<F, Fut>(runs: usize, mut f: F) -> Result<Duration, BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>>,
{
    f().await?; // warm-up
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f().await?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
