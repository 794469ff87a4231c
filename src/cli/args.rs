//! The raw command line, as clap parses it (ripgrep's "low args"). Validation and defaults that
//! need the file system happen in the command modules, not here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
A manifest (HCL) describes one experiment: VMs, clusters, storage, and the post-boot steps that
configure them. dsinfra plans the Azure resources it needs, shows what changes and what it costs,
and keeps a state file next to the manifest in .dsinfra/<manifest>/.

Start here:
  dsinfra init --template dual-dsvm       write a starter manifest
  dsinfra validate dual-dsvm.hcl          check it: every problem at once, with line and column
  dsinfra plan dual-dsvm.hcl              what would be created, and its cost per hour and month
  dsinfra graph dual-dsvm.hcl | dot -Tsvg > graph.svg

Terraform-style single-dash flags work too: -var, -var-file, -target, -out.
Docs: docs/manifest.md (every block and attribute), docs/architecture.md.";

/// Declarative data-science experiment infrastructure on Azure.
#[derive(Debug, Parser)]
#[command(name = "dsinfra", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// When to use colour in output (NO_COLOR is honoured with `auto`).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Colour policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when writing to a terminal and NO_COLOR is unset.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// Every dsinfra command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a starter manifest from a template.
    #[command(after_help = "Run `dsinfra init --list` to see the templates.")]
    Init(InitArgs),
    /// Check a manifest: syntax, types, references, Azure naming rules, VM sizes and regions.
    ///
    /// Every problem is reported at once, each with file:line:col, the source line and what to
    /// do. Needs no Azure account and no network. Exit code 0 when valid, 1 otherwise.
    Validate(ManifestArgs),
    /// Rewrite manifests in canonical format.
    ///
    /// With --check nothing is written: the files that are not formatted are listed and the exit
    /// code is 1, which suits CI.
    Fmt(FmtArgs),
    /// Print the resource dependency graph in Graphviz DOT.
    #[command(after_help = "Example: dsinfra graph nd40.hcl | dot -Tsvg > graph.svg")]
    Graph(ManifestArgs),
    /// Show what apply would create, change, replace or delete, and what it costs.
    ///
    /// The plan compares the manifest with the experiment's state (.dsinfra/<manifest>/). It
    /// names the attribute that forces each replacement and ends with the cost per hour and a
    /// 30-day projection, running and parked.
    #[command(after_help = "\
Exit codes: 0 success (with --detailed-exitcode: no changes), 1 error, 2 changes present
(--detailed-exitcode only).

Examples:
  dsinfra plan exp.hcl -var nodes=6
  dsinfra plan exp.hcl -out exp.plan      save it; `dsinfra show exp.plan` checks it is current
  dsinfra plan exp.hcl --destroy --keep-data")]
    Plan(PlanArgs),
    /// Show a saved plan and check that it still matches the manifest and the state.
    Show(ShowArgs),
    /// Run the built-in ARM emulator as a server (for offline CI and tests).
    ///
    /// It behaves as Azure Resource Manager does for every resource dsinfra creates: long-running
    /// operations, quotas, throttling, ARM's error codes. The endpoint is printed on stdout.
    #[command(after_help = "\
Example:
  dsinfra emulator --port 8443 --latency-scale 0.01 &
  dsinfra apply exp.hcl --endpoint http://127.0.0.1:8443 --auto-approve")]
    Emulator(EmulatorArgs),
}

/// `emulator`
#[derive(Debug, Args)]
pub struct EmulatorArgs {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Directory where the emulated cloud is kept between runs.
    #[arg(long, value_name = "DIR", default_value = ".dsinfra/emulator")]
    pub state_dir: PathBuf,
    /// Multiplies every operation's duration: 1 is near reality (a VM takes ~90 s), 0.01 suits
    /// tests, 0 is instant.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub latency_scale: f64,
    /// Accept only this bearer token (default: any non-empty token).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Fault rules to load at start (JSON list; see docs/emulator.md).
    #[arg(long, value_name = "FILE")]
    pub faults: Option<PathBuf>,
    /// Never answer 429 (the rate-limit headers are still sent).
    #[arg(long)]
    pub no_throttle: bool,
}

/// `init`
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Template name (see --list).
    #[arg(long, short, default_value = "dual-dsvm")]
    pub template: String,
    /// List the templates and exit.
    #[arg(long)]
    pub list: bool,
    /// Where to write the manifest (default: <template>.hcl in the current directory).
    pub path: Option<PathBuf>,
    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
}

/// A manifest and its variable values: what every manifest command reads.
#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// The experiment manifest (HCL).
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// Set a variable: NAME=VALUE (repeatable; later wins).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// Read variables from a file of `name = value` lines (repeatable).
    #[arg(long = "var-file", value_name = "FILE")]
    pub var_files: Vec<PathBuf>,
}

/// `fmt`
#[derive(Debug, Args)]
pub struct FmtArgs {
    /// Manifests to format.
    #[arg(required = true, value_name = "MANIFEST")]
    pub files: Vec<PathBuf>,
    /// Write nothing; list unformatted files and exit 1 if there are any.
    #[arg(long)]
    pub check: bool,
}

/// `plan`
// Each flag is an independent command-line switch, as clap models them.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Save the plan to FILE, bound to the current state and manifest.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the plan as JSON (shaped like `terraform show -json`).
    #[arg(long)]
    pub json: bool,
    /// Exit 0 when there are no changes, 2 when there are, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Plan the destruction of the experiment instead.
    #[arg(long)]
    pub destroy: bool,
    /// With --destroy: keep storage accounts, containers, shares and data disks.
    #[arg(long, requires = "destroy")]
    pub keep_data: bool,
    /// Only plan these resources (and what they need); for exceptional cases (repeatable).
    #[arg(long = "target", value_name = "ADDRESS")]
    pub targets: Vec<String>,
}

/// `show`
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A plan saved with `dsinfra plan -out FILE`.
    #[arg(value_name = "PLANFILE")]
    pub plan: PathBuf,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
    /// The `-var` values the plan was made with (they are not saved in the plan, as they may be
    /// secret; without them the check reports the manifest's variables as changed).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
}

/// Terraform users type `-var x=1`, `-target a.b`, `-out f`. clap has no multi-letter short
/// flags, so these single-dash spellings are rewritten to their `--` forms before parsing. Only
/// exact flag names (or `-flag=value`) are rewritten, never values after them.
pub fn normalise_terraform_flags<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    const LONG_ONLY: [&str; 7] = [
        "var",
        "var-file",
        "target",
        "out",
        "destroy",
        "json",
        "detailed-exitcode",
    ];
    let mut out = Vec::new();
    let mut after_double_dash = false;
    for arg in args {
        if after_double_dash {
            out.push(arg);
            continue;
        }
        if arg == "--" {
            after_double_dash = true;
            out.push(arg);
            continue;
        }
        let rewritten = arg.strip_prefix('-').and_then(|rest| {
            if rest.starts_with('-') {
                return None;
            }
            let name = rest.split_once('=').map_or(rest, |(n, _)| n);
            LONG_ONLY.contains(&name).then(|| format!("--{rest}"))
        });
        out.push(rewritten.unwrap_or(arg));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalise_terraform_flags(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn rewrites_terraform_single_dash_flags_only() {
        assert_eq!(
            norm(&[
                "dsinfra",
                "plan",
                "-var",
                "n=1",
                "-target=vm.a",
                "-v",
                "--out",
                "x"
            ]),
            [
                "dsinfra",
                "plan",
                "--var",
                "n=1",
                "--target=vm.a",
                "-v",
                "--out",
                "x"
            ]
        );
        // A value that happens to look like a flag after `--` is left alone.
        assert_eq!(norm(&["a", "--", "-var"]), ["a", "--", "-var"]);
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
