//! `cargo xtask`: the one entry point for building, testing, the demo, benchmarks and CI.
//!
//! Every subcommand is a typed `argh` struct whose doc comments are its `--help`. Commands
//! that run several steps collect every failure, print a summary, then exit non-zero.

mod bench;
mod build;
mod fuzz;
#[path = "../../backend-sim/capi/headerfacts.rs"]
mod headerfacts;
mod headers;
mod inspect;
mod longci;
mod nostd;
#[path = "../../tests/src/progress.rs"]
mod progress;
mod ring_demo;
mod run;
mod setup;
mod stress;
#[path = "../../backend-sim/capi/stubgen.rs"]
mod stubgen;
mod stubs;
mod test;
mod timeline;

use argh::FromArgs;
use std::process::ExitCode;

pub use acl_notify_core::Soc;

/// acl-notify build orchestrator.
#[derive(FromArgs, Debug)]
struct Xtask {
    #[argh(subcommand)]
    cmd: Cmd,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
enum Cmd {
    Test(test::TestArgs),
    Ci(test::CiArgs),
    CheckNostd(nostd::CheckNostdArgs),
    Size(nostd::SizeArgs),
    Build(build::BuildArgs),
    Demo(build::DemoArgs),
    Bench(bench::BenchArgs),
    Fuzz(fuzz::FuzzArgs),
    Inspect(inspect::InspectArgs),
    Stress(stress::StressArgs),
    CiLong(longci::CiLongArgs),
    Stubs(stubs::StubsArgs),
    Headers(headers::HeadersArgs),
}

/// Which backend a command runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// The software device (`backend-sim`).
    Sim,
    /// The driver backend loading a CANN runtime library (here: the simulator's C library).
    Driver,
    /// Both, one after the other.
    All,
}

impl argh::FromArgValue for BackendArg {
    fn from_arg_value(value: &str) -> Result<Self, String> {
        match value {
            "sim" => Ok(BackendArg::Sim),
            "driver" => Ok(BackendArg::Driver),
            "all" => Ok(BackendArg::All),
            other => Err(format!(
                "unknown backend `{other}`: expected sim, driver or all"
            )),
        }
    }
}

/// A SoC name from SPEC §4, parsed by the core's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocArg(pub Soc);

impl argh::FromArgValue for SocArg {
    fn from_arg_value(value: &str) -> Result<Self, String> {
        Soc::from_name(value).map(SocArg).map_err(|_| {
            let names: Vec<&str> = Soc::ALL.iter().map(|s| s.name()).collect();
            format!(
                "unknown SoC `{value}`: expected one of {}",
                names.join(", ")
            )
        })
    }
}

fn main() -> ExitCode {
    let args: Xtask = argh::from_env();
    let result = match args.cmd {
        Cmd::Test(a) => test::test(&a),
        Cmd::Ci(a) => test::ci(&a),
        Cmd::CheckNostd(a) => nostd::check_nostd(&a),
        Cmd::Size(a) => nostd::size(&a),
        Cmd::Build(a) => build::build(&a),
        Cmd::Demo(a) => build::demo(&a),
        Cmd::Bench(a) => bench::bench(&a),
        Cmd::Fuzz(a) => fuzz::fuzz(&a),
        Cmd::Inspect(a) => inspect::inspect(&a),
        Cmd::Stress(a) => stress::stress(&a),
        Cmd::CiLong(a) => longci::ci_long(&a),
        Cmd::Stubs(a) => stubs::stubs(&a),
        Cmd::Headers(a) => headers::headers(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
