//! The `kaas` command line: `conformance` and `policy inspect`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use kaas::conformance;
use kaas::policy::{ArtifactCache, PolicyRuntime, SandboxLimits};

#[derive(Debug, Parser)]
#[command(
    name = "kaas",
    version,
    about = "Kafka-wire-compatible broker with a programmable transaction coordinator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the conformance vectors against a policy component.
    Conformance {
        /// The policy component (.wasm).
        #[arg(long)]
        policy: PathBuf,
        /// Directory of *.json vector files.
        #[arg(long)]
        suite: Option<PathBuf>,
        /// Also write a JUnit XML report here.
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// Work with policy components.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Print a policy's name, version, WIT package version, features and sha256.
    Inspect {
        /// The policy component (.wasm).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    // Traps must not capture host backtraces (costly on every trap).
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: called first thing in main, before any thread exists, so no
        // other thread can be reading the environment.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("RUST_LIB_BACKTRACE", "0");
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kaas: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> anyhow::Result<PolicyRuntime> {
    PolicyRuntime::new(
        SandboxLimits::default(),
        Some(ArtifactCache::default_location()),
    )
}

fn default_suite() -> PathBuf {
    let here = PathBuf::from("tests/conformance");
    if here.is_dir() {
        here
    } else {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance"))
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Conformance {
            policy,
            suite,
            junit,
        } => {
            let rt = runtime()?;
            let policy = Arc::new(rt.load_file(&policy)?);
            let suite = suite.unwrap_or_else(default_suite);
            let cases = conformance::load_suite(&suite)?;
            let results = conformance::run_cases(&policy, &cases);
            print!("{}", conformance::report(&results));
            if let Some(path) = junit {
                std::fs::write(&path, conformance::junit(&policy.identity().name, &results))
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            let ok = results.iter().all(|r| r.failure.is_none());
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Policy {
            command: PolicyCommand::Inspect { file },
        } => {
            let rt = runtime()?;
            let policy = rt.load_file(&file)?;
            let id = policy.identity();
            println!("name: {}", id.name);
            println!("version: {}", id.version);
            println!("wit: kaas:txn-policy@{}", id.wit_version);
            println!("features: {}", id.features.join(", "));
            println!("sha256: {}", id.sha256);
            Ok(ExitCode::SUCCESS)
        }
    }
}
