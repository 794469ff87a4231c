//! The shell wrapper that carries a script, its parameters and its secrets over stdin.
//!
//! Nothing secret may appear in a remote process's argv: `ps` shows argv to every user on the
//! node. So the only command line is `sudo -n bash -s` (or `bash -s`), and everything else
//! arrives on stdin inside this wrapper: the script body as a quoted here-document written to a
//! private temp file, each secret base64-encoded into a 0600 file under a 0700 directory
//! (`$DSINFRA_SECRETS/<name>`, in /dev/shm when available so it never touches a disk), and
//! non-secret parameters as exported variables, and non-secret input files (a shard list) the
//! same way as secrets but under `$DSINFRA_FILES`. The script then runs from its file with stdin
//! at /dev/null, so a command in it that reads stdin cannot swallow the rest of the wrapper.
//! An EXIT trap removes the directory whatever the outcome.

use std::fmt::Write as _;
use std::time::Duration;

use base64::Engine as _;

use super::secret::Secret;

/// Whom a script runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Privilege {
    /// root, through `sudo -n` (fails at once instead of prompting when sudo needs a password).
    #[default]
    Sudo,
    /// The login user itself.
    User,
}

impl Privilege {
    /// The remote command line that reads the wrapper from stdin.
    pub fn shell(self) -> &'static str {
        match self {
            Self::Sudo => "sudo -n bash -s",
            Self::User => "bash -s",
        }
    }
}

/// A script to run on a node.
#[derive(Debug, Clone, Default)]
pub struct ScriptRequest {
    /// The script body (bash).
    pub script: String,
    /// Non-secret variables exported to the script (names must be shell identifiers).
    pub env: Vec<(String, String)>,
    /// Secrets, each delivered as the file `$DSINFRA_SECRETS/<name>` (0600), removed after the
    /// script ends. Names may use letters, digits, `_`, `-` and `.`.
    pub secrets: Vec<(String, Secret)>,
    /// Non-secret input files, each delivered as `$DSINFRA_FILES/<name>` byte for byte and
    /// removed after the script ends (same name rules as secrets). They travel base64-encoded
    /// like secrets, so any content survives the here-document.
    pub files: Vec<(String, String)>,
    /// Whom the script runs as.
    pub privilege: Privilege,
    /// Kill the script (its whole process group) after this long; it then exits with
    /// [`TIMEOUT_EXIT`] and the epilogue sees that status.
    pub timeout: Option<Duration>,
    /// Shell code run after the script with `$rc` holding its exit status (before the secrets
    /// are removed, as the same user). The wrapper exits with `$rc` whatever it does.
    pub epilogue: Option<String>,
}

impl ScriptRequest {
    /// A request for `script` with no parameters, run as root.
    pub fn new(script: impl Into<String>) -> Self {
        Self {
            script: script.into(),
            ..Self::default()
        }
    }
}

/// The exit status of a script stopped by [`ScriptRequest::timeout`] (coreutils `timeout`).
pub const TIMEOUT_EXIT: u32 = 124;

/// How much longer than the script's own limit the SSH channel waits before giving up on the
/// node: enough for `timeout --kill-after=10` to finish the job.
pub(crate) const CHANNEL_GRACE: Duration = Duration::from_secs(15);

/// Whether `name` is a portable shell variable name.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `name` is safe as a single file name component.
pub(crate) fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `value` as one single-quoted shell word.
pub fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// Renders the wrapper for `request`. `token` makes the here-document delimiter unique; the
/// caller passes a random one, and rendering fails if the script happens to contain it.
pub(crate) fn render(request: &ScriptRequest, token: &str) -> Result<String, String> {
    let delimiter = format!("DSINFRA_EOF_{token}");
    if request.script.contains(&delimiter) {
        return Err("the script contains the here-document delimiter; retry".to_owned());
    }
    for (name, _) in &request.env {
        if !is_identifier(name) {
            return Err(format!("parameter name {name:?} is not a shell identifier"));
        }
    }
    for (name, _) in &request.secrets {
        if !is_file_name(name) {
            return Err(format!(
                "secret name {name:?} must use only letters, digits, '_', '-' and '.'"
            ));
        }
    }
    for (name, _) in &request.files {
        if !is_file_name(name) {
            return Err(format!(
                "file name {name:?} must use only letters, digits, '_', '-' and '.'"
            ));
        }
    }

    let files_len: usize = request
        .files
        .iter()
        .map(|(_, text)| text.len() / 3 * 4 + 128)
        .sum();
    let mut out = String::with_capacity(request.script.len() + files_len + 1024);
    out.push_str(
        "set -u\n\
         umask 077\n\
         dsinfra_dir=$(mktemp -d /dev/shm/dsinfra.XXXXXXXX 2>/dev/null || mktemp -d /tmp/dsinfra.XXXXXXXX) || exit 125\n\
         trap 'rm -rf -- \"$dsinfra_dir\"' EXIT\n",
    );
    let _ = writeln!(out, "cat > \"$dsinfra_dir/script\" <<'{delimiter}'");
    out.push_str(&request.script);
    if !request.script.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{delimiter}");
    if !request.secrets.is_empty() {
        out.push_str("mkdir \"$dsinfra_dir/secrets\"\n");
        let engine = base64::engine::general_purpose::STANDARD;
        for (name, value) in &request.secrets {
            let _ = writeln!(
                out,
                "base64 -d > \"$dsinfra_dir/secrets/{name}\" <<'{delimiter}'\n{}\n{delimiter}",
                engine.encode(value.expose())
            );
        }
        out.push_str("export DSINFRA_SECRETS=\"$dsinfra_dir/secrets\"\n");
    }
    if !request.files.is_empty() {
        out.push_str("mkdir \"$dsinfra_dir/files\"\n");
        let engine = base64::engine::general_purpose::STANDARD;
        for (name, text) in &request.files {
            let _ = writeln!(
                out,
                "base64 -d > \"$dsinfra_dir/files/{name}\" <<'{delimiter}'\n{}\n{delimiter}",
                engine.encode(text)
            );
        }
        out.push_str("export DSINFRA_FILES=\"$dsinfra_dir/files\"\n");
    }
    for (name, value) in &request.env {
        let _ = writeln!(out, "export {name}={}", shell_quote(value));
    }
    out.push_str("umask 022\nrc=0\n");
    // The limit is enforced on the node by coreutils `timeout`, which signals the script's whole
    // process group: killing only the SSH channel's process (sudo) would leave the script
    // running, and it could later write a success marker for a step reported as failed.
    if let Some(limit) = request.timeout {
        let _ = write!(out, "timeout --kill-after=10 {} ", limit.as_secs().max(1));
    }
    out.push_str("bash \"$dsinfra_dir/script\" </dev/null || rc=$?\n");
    if let Some(epilogue) = &request.epilogue {
        out.push_str(epilogue);
        if !epilogue.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str("exit \"$rc\"\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_travel_base64_in_the_body_never_in_plain() {
        let mut request = ScriptRequest::new("echo hi");
        request
            .secrets
            .push(("sas".into(), Secret::new("sig=TOPSECRET")));
        request.env.push(("ACCOUNT".into(), "it's".into()));
        let text = render(&request, "abc").expect("valid request renders");
        assert!(!text.contains("TOPSECRET"));
        assert!(text.contains("base64 -d > \"$dsinfra_dir/secrets/sas\" <<'DSINFRA_EOF_abc'\nc2lnPVRPUFNFQ1JFVA==\nDSINFRA_EOF_abc\n"));
        assert!(text.contains("export ACCOUNT='it'\\''s'\n"));
        assert!(text.contains(
            "cat > \"$dsinfra_dir/script\" <<'DSINFRA_EOF_abc'\necho hi\nDSINFRA_EOF_abc\n"
        ));
        assert!(text.ends_with("bash \"$dsinfra_dir/script\" </dev/null || rc=$?\nexit \"$rc\"\n"));
        request.timeout = Some(Duration::from_secs(90));
        let text = render(&request, "abc").expect("valid request renders");
        assert!(text.contains(
            "\ntimeout --kill-after=10 90 bash \"$dsinfra_dir/script\" </dev/null || rc=$?\n"
        ));
    }

    #[test]
    fn files_travel_byte_exact_under_dsinfra_files() {
        let mut request = ScriptRequest::new("cat \"$DSINFRA_FILES/shard.tsv\"");
        request
            .files
            .push(("shard.tsv".into(), "a\tb\nDSINFRA_EOF_abc".into()));
        let text = render(&request, "abc").expect("valid request renders");
        // Base64, so a line equal to the delimiter cannot end the here-document early.
        assert!(text.contains(
            "mkdir \"$dsinfra_dir/files\"\nbase64 -d > \"$dsinfra_dir/files/shard.tsv\" <<'DSINFRA_EOF_abc'\nYQliCkRTSU5GUkFfRU9GX2FiYw==\nDSINFRA_EOF_abc\nexport DSINFRA_FILES=\"$dsinfra_dir/files\"\n"
        ));
        request.files[0].0 = "../x".into();
        assert_eq!(
            render(&request, "abc"),
            Err("file name \"../x\" must use only letters, digits, '_', '-' and '.'".to_owned())
        );
    }

    #[test]
    fn bad_names_and_delimiter_collisions_are_refused() {
        let mut request = ScriptRequest::new("echo DSINFRA_EOF_x");
        assert_eq!(
            render(&request, "x"),
            Err("the script contains the here-document delimiter; retry".to_owned())
        );
        request.script = "true".into();
        request.env.push(("BAD-NAME".into(), "1".into()));
        assert_eq!(
            render(&request, "x"),
            Err("parameter name \"BAD-NAME\" is not a shell identifier".to_owned())
        );
        request.env.clear();
        request.secrets.push(("../etc".into(), Secret::new("s")));
        assert!(render(&request, "x").is_err());
    }

    /// The wrapper is generated shell: check it with the real shellcheck, like any script.
    #[test]
    fn wrapper_passes_shellcheck() {
        let mut request = ScriptRequest::new("echo \"$GREETING\"");
        request.env.push(("GREETING".into(), "hi".into()));
        request.secrets.push(("sas".into(), Secret::new("s")));
        request.files.push(("list".into(), "x\n".into()));
        request.epilogue = Some("[ \"$rc\" = 0 ] && echo ok".into());
        let text = render(&request, "abc").expect("valid request renders");
        let child = std::process::Command::new("shellcheck")
            .args(["-s", "bash", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "shellcheck is required under CI: {e}"
                );
                eprintln!("SKIPPED: shellcheck not available ({e}); scripts/test installs it");
                return;
            }
        };
        std::io::Write::write_all(
            &mut child.stdin.take().expect("stdin is piped"),
            text.as_bytes(),
        )
        .expect("shellcheck reads stdin");
        let output = child.wait_with_output().expect("shellcheck runs");
        assert!(
            output.status.success(),
            "{}\n{text}",
            String::from_utf8_lossy(&output.stdout)
        );
    }

    #[test]
    fn identifiers_and_file_names() {
        assert!(is_identifier("_A1") && !is_identifier("1A") && !is_identifier(""));
        assert!(is_file_name("mofed-5.9.step") && !is_file_name(".hidden"));
        assert!(!is_file_name("a/b"));
    }
}
