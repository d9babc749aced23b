//! The kit on its own, for probe authors: what `kaas conformance
//! --bootstrap` runs, without building the broker.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "Kafka wire probes against one broker, or two side by side")]
struct Args {
    /// The broker under test.
    #[arg(long)]
    bootstrap: String,
    /// A reference broker to run every probe against too.
    #[arg(long)]
    against_bootstrap: Option<String>,
    /// The reference's major version (which declarations apply).
    #[arg(long, default_value = "4")]
    kafka_version: String,
    /// Declared differences (compat/kafka/differences.json).
    #[arg(long)]
    expect: Option<PathBuf>,
    /// Only probes whose id or name starts with this (repeatable).
    #[arg(long)]
    probe: Vec<String>,
    /// Print every observation.
    #[arg(long)]
    show: bool,
    /// List the probes and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> anyhow::Result<ExitCode> {
    let a = Args::parse();
    if a.list {
        for p in kaas_wirekit::kit::select(kaas_wirekit::probes::all(), &a.probe) {
            println!("{} {}", p.id, p.name);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let opts = kaas_wirekit::Options {
        bootstrap: a.bootstrap,
        against: a.against_bootstrap,
        kafka_version: a.kafka_version,
        expect: a.expect,
        only: a.probe,
        show: a.show,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (ok, _) = rt.block_on(kaas_wirekit::run_cli(&opts))?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
