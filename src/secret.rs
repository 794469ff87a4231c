//! Secrets: the values dsinfra must never print, log or store.
//!
//! Storage account keys, SAS tokens, Azure AD tokens and SSH private keys pass through dsinfra on
//! their way to Azure or to a VM. This module owns the three tools that keep them there:
//!
//! - [`Secret<T>`] wraps a value so that `Debug` and `Display` print `***`. It deliberately does
//!   not implement `Serialize`, so a secret cannot slip into the state or a plan by accident.
//! - The redaction registry ([`register`], [`redact`], [`Redactor`]) remembers every secret value
//!   seen in this process, in the forms it is likely to appear in (raw, percent-encoded, base64),
//!   and replaces any occurrence in a text with `***`. It is the last line of defence for texts we
//!   do not control, such as a service's error message or a library's log line;
//!   [`RedactingWriter`] plugs it into the tracing subscriber the CLI installs (`crate::log`).
//!   The `azure` and `ssh` modules have their own `Secret` types (they import nothing from the
//!   rest of dsinfra); every value those wrap is remembered there, and the process-wide registry
//!   reads the new ones before each redaction ([`absorb_module_secrets`]), so tokens, storage
//!   keys, customData and private keys are redacted without either module knowing about it.
//! - [`FingerprintKey::fingerprint`] is a keyed hash (HMAC-SHA256, hex) that the state can keep to
//!   detect that a secret changed without storing it. The key is per state, so the same secret
//!   has unrelated fingerprints in two states and a stolen state cannot be used to test guesses
//!   against other states' fingerprints.

use std::fmt::{self, Write as _};
use std::io;
use std::sync::{Mutex, RwLock};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What a secret is replaced with wherever it would be shown.
pub const REDACTED: &str = "***";

/// Values shorter than this are not registered: redacting every "ab" in a log would destroy the
/// log and protect nothing, since real keys, tokens and signatures are far longer.
pub const MIN_SECRET_LEN: usize = 8;

/// A value that must not be printed: `Debug` and `Display` show `***`.
///
/// Use [`Secret::expose`] at the single place where the value is really needed (signing a
/// request, writing a 0600 file). `Secret` has no `Serialize` on purpose.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a value without registering it for redaction.
    pub const fn new(value: T) -> Self {
        Self(value)
    }

    /// The wrapped value; the name makes every use visible in review.
    pub const fn expose(&self) -> &T {
        &self.0
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T: AsRef<str>> Secret<T> {
    /// Wraps a value and registers it with the process-wide redaction registry, so that any
    /// text later passed through [`redact`] has it replaced by `***`.
    pub fn registered(value: T) -> Self {
        register(value.as_ref());
        Self(value)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A set of secret values and the text forms they are searched for in.
///
/// The process-wide instance is reached through [`register`] and [`redact`]; separate instances
/// are useful in tests.
#[derive(Debug, Default)]
pub struct Redactor {
    /// Every form of every registered secret, longest first, so that a longer form (the whole
    /// SAS token) is replaced before a shorter one it contains (its signature).
    forms: RwLock<Vec<String>>,
}

impl Redactor {
    /// An empty registry.
    pub const fn new() -> Self {
        Self {
            forms: RwLock::new(Vec::new()),
        }
    }

    /// Remembers `secret` (and its percent-encoded and base64 forms) for redaction. Values shorter
    /// than [`MIN_SECRET_LEN`] are ignored.
    pub fn register(&self, secret: &str) {
        if secret.len() < MIN_SECRET_LEN {
            return;
        }
        let mut forms = self
            .forms
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for form in text_forms(secret) {
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// `text` with every occurrence of every registered form replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        let forms = self
            .forms
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = text.to_owned();
        for form in forms.iter() {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), REDACTED);
            }
        }
        out
    }

    /// How many text forms are registered (each secret has several).
    pub fn len(&self) -> usize {
        self.forms
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

static REGISTRY: Redactor = Redactor::new();

/// The process-wide redaction registry.
pub fn registry() -> &'static Redactor {
    &REGISTRY
}

/// Registers `secret` with the process-wide registry (see [`Redactor::register`]).
pub fn register(secret: &str) {
    REGISTRY.register(secret);
}

/// `text` with every secret registered in this process replaced by `***`, including every value
/// wrapped by `azure::Secret` or `ssh::Secret` so far.
pub fn redact(text: &str) -> String {
    absorb_module_secrets();
    REGISTRY.redact(text)
}

/// Every message of an error's chain (outermost first), each with every registered secret
/// redacted: the last line of defence for a service's or a library's text before it is printed
/// (the layers below already keep secrets out of their own messages).
pub fn redact_chain<'a>(
    chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> Vec<String> {
    chain.map(|cause| redact(&cause.to_string())).collect()
}

/// How many of the `azure` and `ssh` modules' remembered values the registry has read.
static ABSORBED: Mutex<(usize, usize)> = Mutex::new((0, 0));

/// Registers the values `azure::Secret` and `ssh::Secret` wrapped since the last call.
///
/// Those modules cannot call [`register`] (they import nothing from the rest of dsinfra), so
/// they remember what they wrap and the registry pulls it here. [`redact`] calls this first,
/// which means a value is covered from the moment it was wrapped, whatever the order of events.
pub fn absorb_module_secrets() {
    let mut absorbed = ABSORBED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let azure = crate::azure::Secret::remembered_since(absorbed.0);
    let ssh = crate::ssh::Secret::remembered_since(absorbed.1);
    absorbed.0 += azure.len();
    absorbed.1 += ssh.len();
    // Registering under the lock keeps two absorbing threads from skipping values.
    for value in azure.iter().chain(&ssh) {
        REGISTRY.register(value);
    }
}

/// The forms a secret is likely to appear in: as is, percent-encoded (as in a SAS query string,
/// with upper- or lower-case hex digits), and base64-encoded (as in a basic-auth header or a
/// cloud-init payload). Each is cheap to compute; rarer encodings are not attempted.
fn text_forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_owned()];
    let encoded = percent_encode(secret);
    if encoded != secret {
        forms.push(lowercase_percent_hex(&encoded));
        forms.push(encoded);
    }
    forms.push(base64::engine::general_purpose::STANDARD.encode(secret));
    forms.push(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret));
    forms.sort();
    forms.dedup();
    forms
}

/// Percent-encodes everything except RFC 3986 unreserved characters, with upper-case hex digits,
/// as Azure Storage expects in a SAS signature (`+` -> `%2B`, `/` -> `%2F`, `=` -> `%3D`).
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Lower-cases the two hex digits after each `%`, the other spelling some encoders produce.
fn lowercase_percent_hex(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut hex_left = 0;
    for c in encoded.chars() {
        if hex_left > 0 {
            out.push(c.to_ascii_lowercase());
            hex_left -= 1;
        } else {
            if c == '%' {
                hex_left = 2;
            }
            out.push(c);
        }
    }
    out
}

/// Wraps a writer so that everything written through it is redacted first.
///
/// Install it as a tracing subscriber's writer (`fmt().with_writer(|| RedactingWriter::new(
/// std::io::stderr()))`): the fmt layer formats each event into one buffer and writes it with a
/// single call, so a secret is never split across two writes.
#[derive(Debug)]
pub struct RedactingWriter<W> {
    inner: W,
}

impl<W> RedactingWriter<W> {
    /// Redacts with the process-wide registry before writing to `inner`.
    pub const fn new(inner: W) -> Self {
        Self { inner }
    }

    /// The wrapped writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: io::Write> io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.inner.write_all(redact(&text).as_bytes())?;
        // The caller's bytes are all consumed even when redaction changed their length.
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The per-state key of [`FingerprintKey::fingerprint`].
///
/// The key is stored with the state in hex. It is not a secret of the same rank as an account
/// key (whoever reads the state sees it), but it makes fingerprints unique to one state.
#[derive(Clone, PartialEq, Eq)]
pub struct FingerprintKey(Vec<u8>);

impl FingerprintKey {
    /// A fresh random 32-byte key.
    pub fn generate() -> Self {
        let mut bytes = [0_u8; 32];
        rand::fill(&mut bytes[..]);
        Self(bytes.to_vec())
    }

    /// A key from raw bytes (e.g. a test vector).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }

    /// A key read back from its hex form; `None` if `hex` is not hex or is empty.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let bytes = hex::decode(hex).ok()?;
        (!bytes.is_empty()).then_some(Self(bytes))
    }

    /// The hex form the state keeps.
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }

    /// HMAC-SHA256 of `secret` under this key, as lower-case hex: equal fingerprints mean the
    /// secret is unchanged, and the fingerprint reveals nothing usable about the secret.
    ///
    /// # Panics
    ///
    /// Never: HMAC accepts keys of any length.
    pub fn fingerprint(&self, secret: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0)
            .expect("HMAC-SHA256 accepts keys of any length");
        mac.update(secret.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

impl fmt::Debug for FingerprintKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FingerprintKey({REDACTED})")
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn secret_prints_stars_in_debug_and_display() {
        let key = Secret::new(
            "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq".to_owned(),
        );
        assert_eq!(format!("{key:?}"), "***");
        assert_eq!(format!("{key}"), "***");
        assert_eq!(format!("{:?}", Some(&key)), "Some(***)");
        assert_eq!(key.expose().len(), 62);
    }

    #[test]
    fn redact_replaces_raw_percent_encoded_and_base64_forms() {
        let redactor = Redactor::new();
        let sig = "k3y+with/slash=";
        redactor.register(sig);
        let b64 = base64::engine::general_purpose::STANDARD.encode(sig);
        let text =
            format!("raw {sig} url k3y%2Bwith%2Fslash%3D lower k3y%2bwith%2fslash%3d b64 {b64}");
        assert_eq!(redactor.redact(&text), "raw *** url *** lower *** b64 ***");
    }

    #[test]
    fn redact_prefers_the_longest_registered_form() {
        let redactor = Redactor::new();
        redactor.register("signature-value");
        redactor.register("sv=2026&sig=signature-value");
        // Were the signature replaced first, "sv=2026&sig=" would be left behind.
        assert_eq!(
            redactor.redact("GET ?sv=2026&sig=signature-value"),
            "GET ?***"
        );
    }

    #[test]
    fn short_values_are_not_registered() {
        let redactor = Redactor::new();
        redactor.register("abc");
        assert!(redactor.is_empty());
        assert_eq!(redactor.redact("abc abc"), "abc abc");
    }

    #[test]
    fn registered_secret_is_redacted_process_wide() {
        let token = Secret::registered("process-wide-token-1234".to_owned());
        assert_eq!(
            redact("Authorization: Bearer process-wide-token-1234"),
            "Authorization: Bearer ***"
        );
        assert_eq!(token.expose(), "process-wide-token-1234");
    }

    #[test]
    fn redacting_writer_redacts_each_write() {
        register("writer-secret-5678");
        let mut writer = RedactingWriter::new(Vec::new());
        writer
            .write_all(b"INFO uploading with key writer-secret-5678\n")
            .expect("writing to a Vec cannot fail");
        assert_eq!(writer.into_inner(), b"INFO uploading with key ***\n");
    }

    #[test]
    fn values_wrapped_by_the_azure_and_ssh_secret_types_are_redacted() {
        let key = crate::azure::Secret::new("azure-storage-key-for-redaction-1");
        let pem = crate::ssh::Secret::new("ssh-private-key-for-redaction-2");
        assert_eq!(
            redact(&format!("key {} pem {}", key.expose(), pem.expose())),
            "key *** pem ***"
        );
        let mut writer = RedactingWriter::new(Vec::new());
        let late = crate::azure::Secret::new("azure-token-wrapped-after-1st-redact");
        writer
            .write_all(format!("token {}\n", late.expose()).as_bytes())
            .expect("writing to a Vec cannot fail");
        assert_eq!(writer.into_inner(), b"token ***\n");
    }

    #[test]
    fn percent_encode_keeps_unreserved_and_encodes_the_rest() {
        assert_eq!(percent_encode("aZ09-._~+/= &"), "aZ09-._~%2B%2F%3D%20%26");
    }

    #[test]
    fn fingerprint_matches_rfc_4231_test_case_2() {
        // RFC 4231 section 4.3: key "Jefe", data "what do ya want for nothing?".
        let key = FingerprintKey::from_bytes(b"Jefe");
        assert_eq!(
            key.fingerprint("what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn fingerprint_depends_on_the_key_and_detects_change() {
        let a = FingerprintKey::generate();
        let b = FingerprintKey::generate();
        assert_ne!(a, b);
        assert_eq!(a.fingerprint("key-one"), a.fingerprint("key-one"));
        assert_ne!(a.fingerprint("key-one"), a.fingerprint("key-two"));
        assert_ne!(a.fingerprint("key-one"), b.fingerprint("key-one"));
        let restored = FingerprintKey::from_hex(&a.to_hex()).expect("to_hex gives valid hex");
        assert_eq!(restored.fingerprint("key-one"), a.fingerprint("key-one"));
        assert_eq!(format!("{a:?}"), "FingerprintKey(***)");
        assert!(FingerprintKey::from_hex("zz").is_none());
        assert!(FingerprintKey::from_hex("").is_none());
    }
}
