//! The raw command line, as clap parses it (ripgrep's "low args"): every command's clap structs
//! are here, apart from the `cli` that runs them (what a user can type is one module, what each
//! command does is another), and this file imports nothing from the command files. Validation and
//! defaults that need the file system happen in the command modules, not here.

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

    /// Also write a log to FILE (appended; debug level unless DSINFRA_LOG sets a filter).
    /// Secrets are redacted from every line. See docs/security.md.
    #[arg(long, value_name = "FILE", global = true)]
    pub log_file: Option<PathBuf>,

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
    /// Create, change and delete Azure resources until they match the manifest.
    ///
    /// Refreshes the state from ARM, plans, shows the plan and asks for approval, then works
    /// through the changes in dependency order, in parallel, saving the state after every
    /// resource. Give a plan saved with `plan -out` instead of a manifest to apply exactly it.
    #[command(after_help = "\
Exit codes: 0 success, 1 error (the summary lists every failure), 130 interrupted (Ctrl-C).

Examples:
  dsinfra apply exp.hcl --emulator                     against the built-in emulator
  dsinfra apply exp.hcl --auto-approve -var nodes=8
  dsinfra plan exp.hcl -out exp.plan && dsinfra apply exp.plan")]
    Apply(ApplyArgs),
    /// Delete the experiment's Azure resources, dependents first.
    #[command(after_help = "\
Examples:
  dsinfra destroy exp.hcl --emulator
  dsinfra destroy exp.hcl --keep-data      keep storage and data disks, delete compute")]
    Destroy(DestroyArgs),
    /// Park: deallocate the experiment's VMs so compute is no longer billed.
    ///
    /// Disks, public IPs and storage stay (and stay billed). The temp disk of each VM is lost:
    /// BeeOND scratch and blobfuse caches live there. `dsinfra unpark` starts the VMs again.
    /// BeeOND is stopped on the heads first. Each VM's new power state is saved as soon as its
    /// deallocation finishes.
    #[command(after_help = "\
Exit codes: 0 success, 1 error (every VM that failed is listed), 130 interrupted (Ctrl-C: before
the deallocations are sent nothing changes; after, Azure finishes them and dsinfra stops waiting).

Examples:
  dsinfra park exp.hcl --emulator --auto-approve
  dsinfra park exp.hcl --only train        just the VMs of cluster \"train\"")]
    Park(PowerArgs),
    /// Unpark: start the experiment's parked VMs again.
    ///
    /// Checks first that the vCPU quota still holds them (a deallocated VM gave its vCPUs back),
    /// then starts them all at once and runs their per-boot steps again (mounts, caches, BeeOND:
    /// the temp disk is new).
    #[command(after_help = "\
Exit codes: 0 success, 1 error (a quota shortfall, or every VM that failed), 130 interrupted
(Ctrl-C: before the starts are sent nothing changes; after, Azure finishes them).

Examples:
  dsinfra unpark exp.hcl --emulator --auto-approve
  dsinfra unpark exp.hcl --only cluster.train[0]")]
    Unpark(PowerArgs),
    /// Show the experiment's VMs: power state, IPs, uptime and cost per hour and since start.
    ///
    /// Reads every resource back from ARM first (with --emulator/--endpoint or Azure
    /// credentials), so a VM parked by its schedule or deleted outside dsinfra shows as it is;
    /// without a connection it shows what the state recorded and says so. Never writes.
    #[command(after_help = "\
Examples:
  dsinfra status exp.hcl                   against Azure (az login, a service principal, ...)
  dsinfra status exp.hcl --emulator")]
    Status(StatusArgs),
    /// Print the manifest's outputs (sensitive ones only with --show-secrets).
    ///
    /// Values apply resolved come from the state; one only Azure knows (an IP address of an
    /// older state, a sensitive value, which is never stored) is read from ARM. A SAS is
    /// re-signed for --show-secrets, never stored.
    #[command(after_help = "\
Examples:
  dsinfra output exp.hcl                   every output, sensitive ones masked
  dsinfra output exp.hcl ssh               one value, printed raw (for scripts)
  dsinfra output exp.hcl sas --show-secrets --emulator
  dsinfra output exp.hcl --json")]
    Output(OutputArgs),
    /// Open an SSH session on a node (or run a command there), checking its pinned host key.
    ///
    /// Runs the system OpenSSH client with the host key dsinfra pinned when it created the VM
    /// (written to .dsinfra/<manifest>/known_hosts; any other key is refused). Nodes of a cluster
    /// without a public IP are reached through the head node. NODE is an address
    /// (`cluster.train[1]`), a short form (`train[1]`, `train` for the head, `gpu`) or a VM name.
    #[command(after_help = "\
Examples:
  dsinfra ssh exp.hcl train                    a shell on the head of cluster \"train\"
  dsinfra ssh exp.hcl train[2] -- nvidia-smi   run a command on node 2 (through the head)
  dsinfra ssh exp.hcl gpu -i ~/.ssh/exp_key --emulator")]
    Ssh(SshArgs),
    /// Print an ssh_config block for every node, with pinned host keys and jumps through the head.
    ///
    /// Each node gets a `Host <experiment>-<name>` block (`cosmoflow-train-1`) with its address,
    /// user, `HostKeyAlias` and `StrictHostKeyChecking yes` against the known_hosts file dsinfra
    /// writes next to the state. Nodes without a public IP go through the head. Use it for scp,
    /// rsync, VS Code remote or plain ssh.
    #[command(after_help = "\
Examples:
  dsinfra ssh-config exp.hcl > exp.sshconf && ssh -F exp.sshconf cosmoflow-train-1 hostname
  dsinfra ssh-config exp.hcl -i ~/.ssh/exp_key > ~/.ssh/cosmoflow.conf
      then `Include cosmoflow.conf` in ~/.ssh/config and `scp data.tar cosmoflow-train-0:`

Save the output to a file: `ssh -F <(dsinfra ssh-config ...)` cannot work, as ssh closes
inherited descriptors before it reads -F.")]
    SshConfig(SshConfigArgs),
    /// Run your `kubectl` against an AKS cluster of the experiment.
    ///
    /// Reads the cluster's user kubeconfig from ARM (`listClusterUserCredential`), writes it to
    /// .dsinfra/<manifest>/kubeconfig-<label> with mode 0600 (never into the state), and runs
    /// `kubectl --kubeconfig <that file> ARGS...`. The file stays for other tools (`export
    /// KUBECONFIG=...`). Needs `kubectl` on PATH.
    #[command(after_help = "\
Examples:
  dsinfra kubectl aks.hcl -- get nodes
  dsinfra kubectl aks.hcl --cluster train -- apply -f job.yaml
  dsinfra kubectl aks.hcl --endpoint http://127.0.0.1:8080 -- get pods -A
      (against `dsinfra emulator`: the built-in --emulator stops when dsinfra exits)")]
    Kubectl(KubectlArgs),
    /// Run a command on the experiment's nodes as the admin user, with a distributed job's
    /// environment.
    ///
    /// TARGET is a node (`cluster.train[2]`, `vm.gpu`) or a block (`cluster.train`: every node
    /// of it); without it the head (node 0 of the first cluster, else the only VM); `--all`
    /// widens to every node of the target's block. Sessions are SSH with the host keys pinned in
    /// the state, private nodes through the head. The job gets $DSINFRA_HOSTFILE (`host
    /// slots=N`, N = GPUs per node, for mpirun and DeepSpeed), MASTER_ADDR/MASTER_PORT,
    /// NODE_RANK, NNODES and NPROC_PER_NODE (torchrun), and the mounts the block's steps made
    /// ($DSINFRA_SCRATCH for BeeOND). Output streams live, prefixed by node when several run;
    /// the exit code is the job's (several nodes: the first failure's). Each run is recorded
    /// under .dsinfra/<manifest>/runs/<id>/. On spot blocks each node watches for Azure's
    /// eviction notice (--on-preempt runs then), and --recover brings an evicted node back and
    /// starts the job again with $DSINFRA_RESTART_COUNT one higher: a job that checkpoints to
    /// $DSINFRA_CHECKPOINT_DIR resumes. See docs/run.md.
    #[command(after_help = "\
Examples:
  dsinfra run exp.hcl -- nvidia-smi                     on the head
  dsinfra run exp.hcl --all -- 'cat $DSINFRA_HOSTFILE'  on every node of the head's cluster
  dsinfra run exp.hcl cluster.train[2] -- df -h /mnt
  dsinfra run exp.hcl --park-after -- 'mpirun --hostfile $DSINFRA_HOSTFILE python train.py'
  dsinfra run exp.hcl --detach -- 'torchrun --nnodes 1 --nproc-per-node $NPROC_PER_NODE train.py'
      then `dsinfra logs exp.hcl ID -f`
  dsinfra run exp.hcl cluster.train --recover --max-restarts 3 -- ./train.sh --resume
      spot nodes: survive evictions (the job reads $DSINFRA_RESTART_COUNT)")]
    Run(RunArgs),
    /// List the runs recorded for a manifest (id, state, exit, start, duration, command).
    ///
    /// Detached runs still running are asked about on the head when it can be reached.
    #[command(after_help = "\
Examples:
  dsinfra runs exp.hcl
  dsinfra runs exp.hcl --emulator")]
    Runs(RunsArgs),
    /// Print a run's logs; `-f` follows a detached run on the head until it ends.
    #[command(after_help = "\
Examples:
  dsinfra logs exp.hcl 20261126T221500-3f2a
  dsinfra logs exp.hcl 20261126T221500-3f2a -f     follow a detached run to its end")]
    Logs(LogsArgs),
    /// List VM sizes with their facts and, in a region, their prices, to choose a `size`.
    ///
    /// vCPUs, memory, GPUs, temp disk, InfiniBand, accelerated networking, Hyper-V generations,
    /// quota family and retirement come from the catalog shipped in dsinfra (docs/catalog.md: its
    /// sources and date); with --region, only the sizes Azure offers there, with their Linux
    /// pay-as-you-go and spot prices in USD per hour, cheapest first. `?` is a fact the catalog
    /// does not know, `-` is none. Retired sizes are hidden unless --include-retired. No account
    /// or network is needed. See docs/sizes.md.
    #[command(after_help = "\
Examples:
  dsinfra sizes --gpu --region eastus                 GPU sizes offered in eastus, cheapest first
  dsinfra sizes --region westeurope --min-vcpus 16 --temp-disk --max-price 1.5
  dsinfra sizes --infiniband --min-gpus 8 --region southcentralus
  dsinfra sizes --name d8ds --json                    every D8ds size and the regions offering it
  dsinfra sizes --name H100 --json | jq '.[] | {name, regions}'")]
    Sizes(SizesArgs),
    /// Show the benchmark results of `elbencho` and `storage_bench` steps, and draw them.
    ///
    /// Reads `.dsinfra/<manifest>/results/` (filled when apply fetches a benchmark's results),
    /// prints one table (a row per measured point), and writes `report.md` and SVG charts
    /// (bandwidth by threads per block size; bars per path and pass) to
    /// `.dsinfra/<manifest>/reports/`. With a second manifest, its results go side by side with
    /// the first's. Needs no account or network. See docs/report.md.
    #[command(after_help = "\
Examples:
  dsinfra report beeond.hcl                     the sweep's table, report.md and charts
  dsinfra report beeond-4.hcl beeond-8.hcl      two clusters side by side")]
    Report(ReportArgs),
    /// Inspect or move the state: `state list`, `state show ADDRESS`, `state pull`, `state push`.
    #[command(subcommand)]
    State(StateCommands),
    /// Break the lock on a remote state (`backend "azureblob"`) after confirmation.
    ///
    /// Only for a holder that is gone and whose lease has not expired yet (it expires by itself
    /// within a minute); a run still going would fail its next save.
    #[command(after_help = "\
Example:
  dsinfra force-unlock exp.hcl --yes")]
    ForceUnlock(ForceUnlockArgs),
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
    /// Keep the emulated cloud in memory only: nothing is written, and it is gone when the
    /// emulator stops (benchmarks: the emulator's own disk writes are not ARM's latency).
    #[arg(long, conflicts_with = "state_dir")]
    pub in_memory: bool,
    /// Multiplies every operation's duration: 1 is near reality (a VM takes ~90 s), 0.01 suits
    /// tests, 0 is instant. `Retry-After` counts the emulator's own seconds, so any client
    /// (dsinfra's, the Azure SDKs) polls at its speed without knowing the scale.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub latency_scale: f64,
    /// Accept only this bearer token (default: any non-empty token).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Fault rules to load at start (JSON list; see docs/emulator.md).
    #[arg(long, value_name = "FILE")]
    pub faults: Option<PathBuf>,
    /// Never answer 429 (the rate-limit headers are still sent). `PUT /_emulator/throttle`
    /// with `{"enabled": true}` switches it back on while the emulator runs.
    #[arg(long)]
    pub no_throttle: bool,
    /// The subscription's vCPU quota: the limit of every quota family and the regional total,
    /// in every location (default 1,000 a family and 5,000 in a region; a 512-node cluster of a
    /// 4-vCPU size needs 2,048).
    #[arg(long, value_name = "VCPUS")]
    pub vcpu_quota: Option<u32>,
    /// The most items one list answer carries; longer lists continue at `nextLink` (ARM's
    /// resource lists answer up to 1000; 1 makes every list of two items page).
    #[arg(long, value_name = "N", default_value_t = crate::emulator::DEFAULT_PAGE_SIZE,
          value_parser = page_size)]
    pub page_size: usize,
    /// Provider namespaces the subscription starts out not registered for, comma-separated
    /// (e.g. `Microsoft.DevTestLab`): requests to them answer ARM's 409
    /// MissingSubscriptionRegistration until the namespace is registered
    /// (`POST .../providers/{namespace}/register`, as `az provider register` sends).
    #[arg(long, value_name = "NAMESPACES", value_delimiter = ',')]
    pub unregistered: Vec<String>,
    /// Model a subscription registered for Microsoft.Compute/TrustedLaunchByDefaultPreview: a
    /// Generation 2 VM created without a security type gets Trusted Launch with Secure Boot on
    /// (without it, as for most subscriptions, REST clients get no Trusted Launch by default).
    #[arg(long)]
    pub trusted_launch_default: bool,
    /// Preview features the subscription is registered for, comma-separated `Namespace/Name`
    /// (e.g. `Microsoft.Compute/UseStandardSecurityType`, without which ARM refuses a VM body
    /// stating `securityType: Standard`).
    #[arg(long, value_name = "FEATURES", value_delimiter = ',')]
    pub feature: Vec<String>,
    /// Serve the blob data plane of some storage accounts from the Azurite at this URL
    /// (`http://127.0.0.1:10000`): the accounts and keys of `AZURITE_ACCOUNTS` (`name:key;...`,
    /// the variable Azurite reads) advertise Azurite's URL as their blob endpoint, and listKeys
    /// answers their Azurite key. Create such an account with that `name`.
    #[arg(long, value_name = "URL")]
    pub azurite: Option<String>,
    /// Check the objects sent to AKS clusters' Kubernetes API against the published schemas in
    /// this directory: one release's directory of the `kubernetes-validate` package
    /// (`.../kubernetes_validate/kubernetes-json-schema/v1.37.0-local-strict`). Without it only
    /// a CRD's own schema is checked.
    #[arg(long, value_name = "DIR", env = "DSINFRA_KUBE_SCHEMAS")]
    pub kube_schemas: Option<std::path::PathBuf>,
}

/// `--page-size`: a whole number of at least 1 (a page of 0 items would never progress).
fn page_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{text:?} is not a page size: give a whole number of at least 1"
        )),
    }
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
    /// Show this post-boot step as forced on every node (`NAME` or `BLOCK/NAME`, a manifest step
    /// or one of its parts such as `beeond.start`; repeatable).
    #[arg(long = "rerun-step", value_name = "NAME")]
    pub rerun_steps: Vec<String>,
    /// Where ARM is: with a connection the plan refreshes the state (drift) and runs the quota
    /// and SKU preflight first.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `park` and `unpark`
#[derive(Debug, Args)]
pub struct PowerArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Only these VMs: a block (`gpu`, `cluster.train`), a node (`cluster.train[1]`) or an
    /// address (repeatable).
    #[arg(long, value_name = "NAME", num_args = 1..)]
    pub only: Vec<String>,
    /// Where ARM is.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub auto_approve: bool,
    /// How post-boot steps run after `unpark` (`park` stops BeeOND first with the identity).
    #[command(flatten)]
    pub steps: StepsArgs,
}

/// `status`
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Where ARM is (without it, power states are as last recorded).
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `output`
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Print only this output (a string is printed raw, for scripts).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Print the outputs as JSON (shaped like `terraform output -json`).
    #[arg(long)]
    pub json: bool,
    /// Also print sensitive outputs.
    #[arg(long)]
    pub show_secrets: bool,
    /// Where ARM is (without it, values only Azure knows come from the state).
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `state`: inspection (`list`, `show`: ops_cmds.rs) and migration (`pull`, `push`:
/// state_cmds.rs).
#[derive(Debug, Subcommand)]
pub enum StateCommands {
    /// `state list`, `state show`.
    #[command(flatten)]
    Inspect(StateCommand),
    /// Print the state as JSON on stdout, from the backend the manifest names.
    Pull(PullArgs),
    /// Upload a state file to the manifest's backend (refuses another lineage or an older
    /// serial unless --force).
    Push(PushArgs),
}

/// `state list`, `state show`
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List the addresses of every resource in the state.
    List(ManifestArgs),
    /// Show what the state records about one resource.
    Show(StateShowArgs),
}

/// `state show`
#[derive(Debug, Args)]
pub struct StateShowArgs {
    /// The manifest (its state is next to it in .dsinfra/).
    #[arg(value_name = "MANIFEST")]
    pub manifest: std::path::PathBuf,
    /// The resource address, e.g. `vm.gpu.vm` (see `dsinfra state list`).
    #[arg(value_name = "ADDRESS")]
    pub address: String,
}

/// `apply`
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The manifest (or a plan saved with `plan -out`) and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Where ARM is.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Do not ask for approval (required when stdin is not a terminal).
    #[arg(long)]
    pub auto_approve: bool,
    /// Only apply these resources (and what they need); for exceptional cases (repeatable).
    #[arg(long = "target", value_name = "ADDRESS")]
    pub targets: Vec<String>,
    /// How post-boot steps run.
    #[command(flatten)]
    pub steps: StepsArgs,
}

/// Whether post-boot steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StepsChoice {
    /// Run them on every node that can be reached; say plainly which were not and why.
    Auto,
    /// Run them everywhere; a node that cannot be reached is an error.
    Run,
    /// Do not run them.
    Skip,
}

/// Post-boot step flags of `apply` and `unpark`.
#[derive(Debug, Clone, Args)]
pub struct StepsArgs {
    /// Run post-boot steps: `auto` on every reachable node (an emulated VM without an SSH
    /// endpoint is reported, not an error), `run` everywhere or fail, `skip` not at all.
    #[arg(long = "steps", value_enum, value_name = "WHEN", default_value_t = StepsChoice::Auto)]
    pub mode: StepsChoice,
    /// Run this step again on every node whatever its markers say (`NAME` or `BLOCK/NAME`; a
    /// manifest step or one of its parts such as `beeond.start`; repeatable).
    #[arg(long = "rerun-step", value_name = "NAME")]
    pub rerun_steps: Vec<String>,
    /// The SSH private key to log in to the VMs with (else $DSINFRA_SSH_IDENTITY, else
    /// ssh-agent via $SSH_AUTH_SOCK, else ~/.ssh/id_ed25519, then ~/.ssh/id_rsa).
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,
}

impl StepsArgs {
    /// The step flags as the operations take them.
    pub fn options(&self) -> crate::engine::op::StepsOptions {
        use crate::engine::op::StepsMode;
        crate::engine::op::StepsOptions {
            mode: match self.mode {
                StepsChoice::Auto => StepsMode::Auto,
                StepsChoice::Run => StepsMode::Run,
                StepsChoice::Skip => StepsMode::Skip,
            },
            rerun: self.rerun_steps.iter().cloned().collect(),
            identity: self.identity.clone(),
        }
    }
}

/// `destroy`
#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Where ARM is.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Do not ask for approval (required when stdin is not a terminal).
    #[arg(long)]
    pub auto_approve: bool,
    /// Keep storage accounts, containers, shares and data disks (and what they need).
    #[arg(long)]
    pub keep_data: bool,
    /// Only destroy these resources (and what depends on them); for exceptional cases.
    #[arg(long = "target", value_name = "ADDRESS")]
    pub targets: Vec<String>,
    /// The SSH private key used to stop BeeOND on cluster heads first (as for `apply -i`).
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,
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

/// `dsinfra ssh`
#[derive(Debug, Args)]
pub struct SshArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// The node: its address (`vm.gpu`, `cluster.train[1]`), short form (`gpu`, `train[1]`,
    /// `train` for the head) or VM name (`cosmoflow-train-1`).
    #[arg(value_name = "NODE")]
    pub node: String,
    /// Log in with this private key (passed to `ssh -i`, and to the jump through the head).
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// Where ARM is (IP addresses are read from it; emulator IPs map to local endpoints).
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// A command to run instead of an interactive shell (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `dsinfra kubectl`
#[derive(Debug, Args)]
pub struct KubectlArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// The `aks` block's label, when the experiment has several clusters.
    #[arg(long, value_name = "LABEL")]
    pub cluster: Option<String>,
    /// Where ARM is.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// What `kubectl` is given (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

/// `dsinfra run`
#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)] // Each bool is one of the command's flags.
pub struct RunArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// A node (`cluster.train[2]`, `vm.gpu`) or a block (`cluster.train`); the head without.
    #[arg(value_name = "TARGET")]
    pub target: Option<String>,
    /// Every node of the target's block (of the head's block without a TARGET).
    #[arg(long)]
    pub all: bool,
    /// Start the job on the head and return; it survives this command (follow it with
    /// `dsinfra logs FILE ID -f`).
    #[arg(long)]
    pub detach: bool,
    /// When the job ends, successful or not, park the experiment's VMs (`dsinfra park`).
    #[arg(long)]
    pub park_after: bool,
    /// Spot nodes: when Azure evicts one, stop the job everywhere, bring the node back (start
    /// it, or create it again; capacity refusals are retried with backoff), re-run the steps it
    /// needs (a BeeOND scratch is rebuilt across the block) and start the job again with
    /// DSINFRA_RESTART_COUNT one higher. The job must checkpoint to resume (docs/run.md).
    /// With --detach: `dsinfra logs FILE ID -f` recovers the run while it follows it.
    #[arg(long)]
    pub recover: bool,
    /// With --recover: start the job again at most N times.
    #[arg(long, value_name = "N", default_value_t = 3, requires = "recover")]
    pub max_restarts: u32,
    /// Spot nodes: run CMD on a node when Azure announces its eviction (about 30 s before),
    /// in the job's environment with DSINFRA_PREEMPT_NOT_BEFORE set: save a checkpoint here.
    #[arg(long, value_name = "CMD")]
    pub on_preempt: Option<String>,
    /// Where the job keeps its checkpoints, given to it as DSINFRA_CHECKPOINT_DIR (default:
    /// `checkpoints` under the block's first file share, Blob or NFS mount; never the
    /// scratch, which an eviction takes).
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<String>,
    /// The SSH private key to log in with (else $DSINFRA_SSH_IDENTITY, ssh-agent,
    /// ~/.ssh/id_ed25519, ~/.ssh/id_rsa).
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// Where ARM is (IP addresses are read from it; emulator IPs map to local endpoints).
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The command, after `--` (words joined by spaces for the node's shell, as ssh does).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `dsinfra runs`
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// The SSH private key to ask the head with.
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// Where ARM is.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `dsinfra logs`
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// The run's id (`dsinfra runs FILE` lists them).
    #[arg(value_name = "ID")]
    pub id: String,
    /// Follow a detached run's log on the head until the job ends. A run started with
    /// `--detach --recover` is recovered while followed: evicted spot nodes brought back and the
    /// job started again, its log followed on.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The SSH private key to reach the head with.
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// Where ARM is.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `dsinfra ssh-config`
#[derive(Debug, Args)]
pub struct SshConfigArgs {
    /// The manifest and its variables.
    #[command(flatten)]
    pub manifest: ManifestArgs,
    /// Add `IdentityFile FILE` to every host (and use it for the jump through the head).
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// Where ARM is (IP addresses are read from it; emulator IPs map to local endpoints).
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `dsinfra report`
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The manifest whose results to report, and optionally a second one to compare with.
    #[arg(value_name = "MANIFEST", required = true, num_args = 1..=2)]
    pub manifests: Vec<PathBuf>,
}

/// `dsinfra sizes`
// Each flag is an independent filter switch, as clap models them.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args)]
pub struct SizesArgs {
    /// Only sizes with GPUs (a whole GPU or part of one).
    #[arg(long)]
    pub gpu: bool,
    /// Only sizes Azure offers in this region (`eastus`; `East US` works too), with their price
    /// there, cheapest first.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// Only sizes whose Linux pay-as-you-go price in --region (required with it) is at most
    /// this many USD per hour.
    #[arg(long, value_name = "USD", requires = "region", value_parser = non_negative)]
    pub max_price: Option<f64>,
    /// Only sizes with at least this many vCPUs.
    #[arg(long, value_name = "N")]
    pub min_vcpus: Option<u32>,
    /// Only sizes with at least this many GPUs (`1` leaves out sizes with part of a GPU).
    #[arg(long, value_name = "N", value_parser = non_negative)]
    pub min_gpus: Option<f64>,
    /// Only sizes whose name contains this text, in any case (`d8ds`, `H100`, `_v5`).
    #[arg(long, value_name = "TEXT")]
    pub name: Option<String>,
    /// Only sizes with an InfiniBand (RDMA) network, for MPI and NCCL across nodes.
    #[arg(long)]
    pub infiniband: bool,
    /// Only sizes known to have a local temp disk (BeeOND scratch, blobfuse caches); sizes whose
    /// temp disk the catalog does not know (`?`) are left out too.
    #[arg(long)]
    pub temp_disk: bool,
    /// Also list sizes Azure has retired (hidden by default: they can no longer be created).
    #[arg(long)]
    pub include_retired: bool,
    /// Print the sizes as a JSON array: every fact (`null` when unknown), and the region's
    /// `price` and `spot` with --region, else the `regions` that offer each size.
    #[arg(long)]
    pub json: bool,
}

/// `--max-price`, `--min-gpus`: a number of at least 0.
fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
        _ => Err(format!(
            "{text:?} is not a number of at least 0 (for example 1.5)"
        )),
    }
}

/// `state pull`
#[derive(Debug, Args)]
pub struct PullArgs {
    /// The manifest whose state to print (its `backend` block says where it is).
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
}

/// `state push`
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The manifest whose backend receives the state.
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// The state file to upload (e.g. from `dsinfra state pull`).
    #[arg(value_name = "STATEFILE")]
    pub state_file: PathBuf,
    /// Replace the backend's state even if it is another lineage or a newer serial.
    #[arg(long)]
    pub force: bool,
}

/// `force-unlock`
#[derive(Debug, Args)]
pub struct ForceUnlockArgs {
    /// The manifest whose remote state lock to break.
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
}

/// Terraform users type `-var x=1`, `-target a.b`, `-out f`. clap has no multi-letter short
/// flags, so these single-dash spellings are rewritten to their `--` forms before parsing. Only
/// exact flag names (or `-flag=value`) are rewritten, never values after them.
pub fn normalise_terraform_flags<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    const LONG_ONLY: [&str; 9] = [
        "var",
        "var-file",
        "target",
        "out",
        "destroy",
        "json",
        "detailed-exitcode",
        "auto-approve",
        "parallelism",
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

/// How to reach ARM.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Use the built-in ARM emulator in-process (its cloud is kept in .dsinfra/emulator/ next to
    /// the manifest, so later commands see the same resources). No Azure account needed.
    #[arg(long, conflicts_with = "endpoint")]
    pub emulator: bool,
    /// Use a running ARM-compatible endpoint, e.g. `dsinfra emulator`'s http://127.0.0.1:PORT.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// At most N ARM requests in flight at once, for every call the command makes; fewer while
    /// ARM throttles.
    #[arg(long, value_name = "N", default_value_t = crate::engine::limiter::DEFAULT_PARALLELISM)]
    pub parallelism: std::num::NonZeroUsize,
}

impl ConnectArgs {
    /// The connection these flags ask for.
    pub fn options(&self) -> crate::connect::Options {
        use crate::connect::Choice;
        crate::connect::Options {
            choice: match (&self.endpoint, self.emulator) {
                (Some(url), _) => Choice::Endpoint(url.clone()),
                (None, true) => Choice::BuiltInEmulator,
                (None, false) => Choice::Azure,
            },
            parallelism: self.parallelism,
        }
    }
}
