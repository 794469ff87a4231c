//! Shared access signatures signed locally from a storage account key.
//!
//! dsinfra signs SAS tokens itself instead of asking ARM (ListAccountSas/ListServiceSas) because
//! ARM's examples return old `sv=2015-04-05` tokens and every round trip would send the key's
//! product over the wire once more. Signing is pure: `sig = Base64(HMAC-SHA256(key =
//! Base64Decode(account key), msg = string-to-sign))`, with the string-to-sign laid out exactly as
//! `shared/reference/arm.md` section 5 records it for signed versions from 2020-12-06 on (the `ses`
//! encryption-scope line included, left empty).
//!
//! Defaults are the safe ones: read + list only, HTTPS only, and an expiry that the caller must
//! give (there is no constructor without one).

use std::fmt::{self, Write as _};

use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

use super::Error;
use crate::secret::{self, Secret, percent_encode};

/// The signed version (`sv`) of every SAS dsinfra signs.
///
/// It is the REST version azure_storage_blob 1.1 sends as `x-ms-version`, so SAS and requests
/// speak the same version. The string-to-sign layout has been the same since 2020-12-06. Azurite
/// 3.35 picks the layout by comparing `sv` with "2020-12-06" as a string, so it accepts it too.
pub const SIGNED_VERSION: &str = "2026-04-06";

/// A storage account name with its decoded key: the input of every signature.
#[derive(Clone)]
pub struct AccountKey {
    account: String,
    key: Secret<Vec<u8>>,
}

impl AccountKey {
    /// Decodes a base64 account key (as listKeys returns it) and registers it for redaction.
    pub fn new(account: &str, base64_key: &str) -> Result<Self, Error> {
        secret::register(base64_key);
        if account.is_empty() {
            return Err(Error::invalid("the storage account name is empty"));
        }
        let key = base64::engine::general_purpose::STANDARD
            .decode(base64_key.trim())
            .map_err(|_| {
                Error::invalid(format!(
                    "the key of storage account {account} is not valid base64"
                ))
            })?;
        if key.is_empty() {
            return Err(Error::invalid(format!(
                "the key of storage account {account} is empty"
            )));
        }
        Ok(Self {
            account: account.to_owned(),
            key: Secret::new(key),
        })
    }

    /// The storage account name.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// Base64 of HMAC-SHA256 of `string_to_sign` under this key.
    ///
    /// # Panics
    ///
    /// Never: HMAC accepts keys of any length.
    pub fn sign(&self, string_to_sign: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key.expose())
            .expect("HMAC-SHA256 accepts keys of any length");
        mac.update(string_to_sign.as_bytes());
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    }
}

impl fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccountKey")
            .field("account", &self.account)
            .field("key", &self.key)
            .finish()
    }
}

/// What a SAS allows. Only the permissions dsinfra hands out are modelled; the letters are
/// written in the order each kind of SAS documents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[allow(clippy::struct_excessive_bools)] // One flag per SAS permission letter is the natural model.
pub struct Permissions {
    /// `r`: read blobs and files.
    pub read: bool,
    /// `a`: append to append blobs.
    pub add: bool,
    /// `c`: create new blobs and files.
    pub create: bool,
    /// `w`: write and overwrite.
    pub write: bool,
    /// `d`: delete.
    pub delete: bool,
    /// `l`: list.
    pub list: bool,
}

impl Permissions {
    /// Read and list: the default, enough for training jobs that only consume data.
    pub const READ_LIST: Self = Self {
        read: true,
        add: false,
        create: false,
        write: false,
        delete: false,
        list: true,
    };

    /// Read, add, create, write and list: for jobs that write results, without delete.
    pub const READ_WRITE: Self = Self {
        read: true,
        add: true,
        create: true,
        write: true,
        delete: false,
        list: true,
    };

    /// Every modelled permission, delete included.
    pub const ALL: Self = Self {
        read: true,
        add: true,
        create: true,
        write: true,
        delete: true,
        list: true,
    };

    fn letters(self, order: &str) -> String {
        order
            .chars()
            .filter(|letter| match letter {
                'r' => self.read,
                'a' => self.add,
                'c' => self.create,
                'w' => self.write,
                'd' => self.delete,
                'l' => self.list,
                _ => false,
            })
            .collect()
    }

    /// The `sp` value of an account SAS ("rwdlac" order).
    pub fn account_letters(self) -> String {
        self.letters("rwdlac")
    }

    /// The `sp` value of a blob or container SAS ("racwdl" order).
    pub fn blob_letters(self) -> String {
        self.letters("racwdl")
    }

    /// The `sp` value of a file share SAS ("rcwdl" order; file shares have no add).
    pub fn file_letters(self) -> String {
        self.letters("rcwdl")
    }
}

/// The services an account SAS covers (`ss`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[allow(clippy::struct_excessive_bools)] // One flag per service letter, as the API has it.
pub struct Services {
    /// `b`: Blob.
    pub blob: bool,
    /// `f`: Files.
    pub file: bool,
    /// `q`: Queue.
    pub queue: bool,
    /// `t`: Table.
    pub table: bool,
}

impl Services {
    /// Blob only: what dsinfra uses.
    pub const BLOB: Self = Self {
        blob: true,
        file: false,
        queue: false,
        table: false,
    };

    fn letters(self) -> String {
        [
            (self.blob, 'b'),
            (self.file, 'f'),
            (self.queue, 'q'),
            (self.table, 't'),
        ]
        .into_iter()
        .filter_map(|(on, letter)| on.then_some(letter))
        .collect()
    }
}

/// The resource types an account SAS covers (`srt`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceTypes {
    /// `s`: service-level calls (list containers, service properties).
    pub service: bool,
    /// `c`: container-level calls (create container, list blobs).
    pub container: bool,
    /// `o`: object-level calls (blobs, files).
    pub object: bool,
}

impl ResourceTypes {
    /// Containers and objects, without service-level calls: listing and reading blobs need no
    /// more.
    pub const CONTAINER_OBJECT: Self = Self {
        service: false,
        container: true,
        object: true,
    };

    /// Service, container and object.
    pub const ALL: Self = Self {
        service: true,
        container: true,
        object: true,
    };

    fn letters(self) -> String {
        [
            (self.service, 's'),
            (self.container, 'c'),
            (self.object, 'o'),
        ]
        .into_iter()
        .filter_map(|(on, letter)| on.then_some(letter))
        .collect()
    }
}

/// What a SAS grants access to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scope {
    /// An account SAS over the given services and resource types.
    Account {
        /// `ss`.
        services: Services,
        /// `srt`.
        resource_types: ResourceTypes,
    },
    /// A service SAS for one blob container (`sr=c`).
    Container {
        /// The container name.
        container: String,
    },
    /// A service SAS for one blob (`sr=b`).
    Blob {
        /// The container name.
        container: String,
        /// The blob name, unencoded.
        blob: String,
    },
    /// A service SAS for one file share (`sr=s`).
    Share {
        /// The share name.
        share: String,
    },
}

/// Which protocols a SAS may be used over (`spr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// `https`: the default.
    #[default]
    HttpsOnly,
    /// `https,http`: only for local emulators such as Azurite.
    HttpsAndHttp,
}

impl Protocol {
    fn as_str(self) -> &'static str {
        match self {
            Self::HttpsOnly => "https",
            Self::HttpsAndHttp => "https,http",
        }
    }
}

/// The non-secret description of a SAS: what the state and the plan keep instead of the token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SasSpec {
    /// What it grants access to.
    pub scope: Scope,
    /// What it allows.
    pub permissions: Permissions,
    /// Not valid before (`st`); `None` means valid at once.
    pub start: Option<DateTime<Utc>>,
    /// Not valid after (`se`): required.
    pub expiry: DateTime<Utc>,
    /// Allowed client IP or range (`sip`), e.g. `10.0.0.1` or `10.0.0.1-10.0.0.9`.
    pub ip_range: Option<String>,
    /// `spr`.
    pub protocol: Protocol,
}

impl SasSpec {
    /// An account SAS for Blob, containers and objects, read + list, HTTPS only.
    pub fn account(expiry: DateTime<Utc>) -> Self {
        Self::with_scope(
            Scope::Account {
                services: Services::BLOB,
                resource_types: ResourceTypes::CONTAINER_OBJECT,
            },
            expiry,
        )
    }

    /// A service SAS for one container, read + list, HTTPS only.
    pub fn container(container: &str, expiry: DateTime<Utc>) -> Self {
        Self::with_scope(
            Scope::Container {
                container: container.to_owned(),
            },
            expiry,
        )
    }

    /// A service SAS for one blob, read only (list means nothing for one blob), HTTPS only.
    pub fn blob(container: &str, blob: &str, expiry: DateTime<Utc>) -> Self {
        let mut spec = Self::with_scope(
            Scope::Blob {
                container: container.to_owned(),
                blob: blob.to_owned(),
            },
            expiry,
        );
        spec.permissions.list = false;
        spec
    }

    /// A service SAS for one file share, read + list, HTTPS only.
    pub fn share(share: &str, expiry: DateTime<Utc>) -> Self {
        Self::with_scope(
            Scope::Share {
                share: share.to_owned(),
            },
            expiry,
        )
    }

    fn with_scope(scope: Scope, expiry: DateTime<Utc>) -> Self {
        Self {
            scope,
            permissions: Permissions::READ_LIST,
            start: None,
            expiry,
            ip_range: None,
            protocol: Protocol::HttpsOnly,
        }
    }

    /// The same SAS with other permissions.
    #[must_use]
    pub fn permissions(mut self, permissions: Permissions) -> Self {
        self.permissions = permissions;
        self
    }

    /// The same SAS, valid from `start`.
    #[must_use]
    pub fn start(mut self, start: DateTime<Utc>) -> Self {
        self.start = Some(start);
        self
    }

    /// The same SAS, restricted to a client IP or range.
    #[must_use]
    pub fn ip_range(mut self, ip_range: &str) -> Self {
        self.ip_range = Some(ip_range.to_owned());
        self
    }

    /// The same SAS, HTTPS only (`true`, the default) or also plain HTTP (`false`, for Azurite).
    #[must_use]
    pub fn https_only(mut self, https_only: bool) -> Self {
        self.protocol = if https_only {
            Protocol::HttpsOnly
        } else {
            Protocol::HttpsAndHttp
        };
        self
    }

    fn sp(&self) -> String {
        match self.scope {
            Scope::Account { .. } => self.permissions.account_letters(),
            Scope::Container { .. } | Scope::Blob { .. } => self.permissions.blob_letters(),
            Scope::Share { .. } => self.permissions.file_letters(),
        }
    }

    /// The exact text that is signed, per arm.md section 5 for `sv` >= 2020-12-06.
    pub fn string_to_sign(&self, account: &str) -> String {
        let sp = self.sp();
        let st = self.start.map(format_time).unwrap_or_default();
        let se = format_time(self.expiry);
        let sip = self.ip_range.clone().unwrap_or_default();
        let spr = self.protocol.as_str();
        let sv = SIGNED_VERSION;
        // `ses` (encryption scope), `si` (stored policy), the snapshot time and the `rsc*`
        // response-header overrides are not used: their lines are present and empty.
        match &self.scope {
            Scope::Account {
                services,
                resource_types,
            } => {
                let ss = services.letters();
                let srt = resource_types.letters();
                // The account SAS ends with a newline after `ses` too.
                format!("{account}\n{sp}\n{ss}\n{srt}\n{st}\n{se}\n{sip}\n{spr}\n{sv}\n\n")
            }
            Scope::Container { container } => {
                format!(
                    "{sp}\n{st}\n{se}\n/blob/{account}/{container}\n\n{sip}\n{spr}\n{sv}\nc\n\n\n\n\n\n\n"
                )
            }
            Scope::Blob { container, blob } => {
                format!(
                    "{sp}\n{st}\n{se}\n/blob/{account}/{container}/{blob}\n\n{sip}\n{spr}\n{sv}\nb\n\n\n\n\n\n\n"
                )
            }
            Scope::Share { share } => {
                format!("{sp}\n{st}\n{se}\n/file/{account}/{share}\n\n{sip}\n{spr}\n{sv}\n\n\n\n\n")
            }
        }
    }

    /// The query parameters of the token, in order, before the signature is appended.
    fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![("sv", SIGNED_VERSION.to_owned())];
        if let Scope::Account {
            services,
            resource_types,
        } = &self.scope
        {
            fields.push(("ss", services.letters()));
            fields.push(("srt", resource_types.letters()));
        }
        fields.push(("sp", self.sp()));
        if let Some(start) = self.start {
            fields.push(("st", format_time(start)));
        }
        fields.push(("se", format_time(self.expiry)));
        if let Some(ip) = &self.ip_range {
            fields.push(("sip", ip.clone()));
        }
        fields.push(("spr", self.protocol.as_str().to_owned()));
        match &self.scope {
            Scope::Account { .. } => {}
            Scope::Container { .. } => fields.push(("sr", "c".to_owned())),
            Scope::Blob { .. } => fields.push(("sr", "b".to_owned())),
            Scope::Share { .. } => fields.push(("sr", "s".to_owned())),
        }
        fields
    }

    fn validate(&self) -> Result<(), Error> {
        if self.sp().is_empty() {
            return Err(Error::invalid("a SAS needs at least one permission"));
        }
        if let Some(start) = self.start
            && start >= self.expiry
        {
            return Err(Error::invalid(format!(
                "the SAS expiry {} is not after its start {}",
                format_time(self.expiry),
                format_time(start)
            )));
        }
        if let Scope::Account {
            services,
            resource_types,
        } = &self.scope
            && (services.letters().is_empty() || resource_types.letters().is_empty())
        {
            return Err(Error::invalid(
                "an account SAS needs at least one service and one resource type",
            ));
        }
        Ok(())
    }

    /// Signs this SAS with `key`. The token and its signature are registered for redaction.
    pub fn sign(&self, key: &AccountKey) -> Result<SasToken, Error> {
        self.validate()?;
        let signature = key.sign(&self.string_to_sign(key.account()));
        secret::register(&signature);
        let mut query = String::new();
        for (name, value) in self.fields() {
            // Writing to a String cannot fail.
            let _ = write!(query, "{name}={}&", percent_encode(&value));
        }
        query.push_str("sig=");
        query.push_str(&percent_encode(&signature));
        secret::register(&query);
        Ok(SasToken {
            spec: self.clone(),
            account: key.account().to_owned(),
            query: Secret::new(query),
        })
    }
}

/// SAS times: UTC, whole seconds, `Z` suffix, signed exactly as they appear in the token.
fn format_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A signed SAS: the secret query string and the non-secret spec it was made from.
#[derive(Clone, Debug)]
pub struct SasToken {
    spec: SasSpec,
    account: String,
    query: Secret<String>,
}

impl SasToken {
    /// The query string without the leading `?`. This is the secret: hand it only to the
    /// request that needs it.
    pub fn expose_query(&self) -> &str {
        self.query.expose()
    }

    /// The query string, still wrapped.
    pub fn query(&self) -> &Secret<String> {
        &self.query
    }

    /// What was signed: safe to store and print.
    pub fn spec(&self) -> &SasSpec {
        &self.spec
    }

    /// The account it was signed for.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// When it stops working.
    pub fn expiry(&self) -> DateTime<Utc> {
        self.spec.expiry
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;

    /// Azurite's well-known development key: public, so usable in a test.
    const DEV_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    fn expiry() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
            .single()
            .expect("a valid date")
    }

    fn key() -> AccountKey {
        AccountKey::new("devstoreaccount1", DEV_KEY).expect("the dev key is valid base64")
    }

    #[test]
    fn account_string_to_sign_has_every_field_and_a_trailing_newline() {
        let spec = SasSpec::account(expiry()).start(
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
                .single()
                .expect("a valid date"),
        );
        assert_eq!(
            spec.string_to_sign("devstoreaccount1"),
            "devstoreaccount1\nrl\nb\nco\n2026-01-01T00:00:00Z\n2026-01-02T03:04:05Z\n\nhttps\n2026-04-06\n\n"
        );
    }

    #[test]
    fn container_string_to_sign_has_sixteen_lines_without_a_trailing_newline() {
        let spec = SasSpec::container("raw", expiry())
            .https_only(false)
            .permissions(Permissions::READ_WRITE);
        assert_eq!(
            spec.string_to_sign("acct"),
            "racwl\n\n2026-01-02T03:04:05Z\n/blob/acct/raw\n\n\nhttps,http\n2026-04-06\nc\n\n\n\n\n\n\n"
        );
        assert_eq!(spec.string_to_sign("acct").split('\n').count(), 16);
    }

    #[test]
    fn blob_string_to_sign_names_the_blob_unencoded() {
        let spec = SasSpec::blob("state", "exp one/dsinfra.tfstate", expiry()).ip_range("10.0.0.1");
        assert_eq!(
            spec.string_to_sign("acct"),
            "r\n\n2026-01-02T03:04:05Z\n/blob/acct/state/exp one/dsinfra.tfstate\n\n10.0.0.1\nhttps\n2026-04-06\nb\n\n\n\n\n\n\n"
        );
    }

    #[test]
    fn share_string_to_sign_follows_the_file_layout() {
        let spec = SasSpec::share("scratch", expiry()).permissions(Permissions::ALL);
        assert_eq!(
            spec.string_to_sign("acct"),
            "rcwdl\n\n2026-01-02T03:04:05Z\n/file/acct/scratch\n\n\nhttps\n2026-04-06\n\n\n\n\n"
        );
        assert_eq!(spec.string_to_sign("acct").split('\n').count(), 13);
    }

    #[test]
    fn account_token_fields_come_in_the_documented_order() {
        let spec = SasSpec::account(expiry())
            .start(
                Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
                    .single()
                    .expect("a valid date"),
            )
            .ip_range("127.0.0.1")
            .https_only(false);
        let token = spec.sign(&key()).expect("a valid spec signs");
        let names: Vec<&str> = token
            .expose_query()
            .split('&')
            .map(|pair| pair.split('=').next().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            ["sv", "ss", "srt", "sp", "st", "se", "sip", "spr", "sig"]
        );
        assert!(token.expose_query().starts_with(
            "sv=2026-04-06&ss=b&srt=co&sp=rl&st=2026-01-01T00%3A00%3A00Z&se=2026-01-02T03%3A04%3A05Z&sip=127.0.0.1&spr=https%2Chttp&sig="
        ));
    }

    #[test]
    fn signature_is_base64_hmac_of_the_string_to_sign_percent_encoded() {
        let spec = SasSpec::container("raw", expiry());
        let token = spec.sign(&key()).expect("a valid spec signs");
        let expected_sig = key().sign(&spec.string_to_sign("devstoreaccount1"));
        // HMAC-SHA256 is 32 bytes: 44 base64 characters ending in one '='.
        assert_eq!(expected_sig.len(), 44);
        assert!(expected_sig.ends_with('='));
        let sig = token
            .expose_query()
            .rsplit("sig=")
            .next()
            .unwrap_or_default();
        assert_eq!(sig, percent_encode(&expected_sig));
        assert!(sig.ends_with("%3D"));
        assert!(!sig.contains('+') && !sig.contains('/'));
        assert_eq!(
            token.expose_query(),
            format!("sv=2026-04-06&sp=rl&se=2026-01-02T03%3A04%3A05Z&spr=https&sr=c&sig={sig}")
        );
    }

    #[test]
    fn hmac_matches_an_independent_known_answer() {
        // RFC 4231 test case 2, with its key "Jefe" written as base64 ("SmVmZQ==").
        let key = AccountKey::new("acct", "SmVmZQ==").expect("valid base64");
        let expected = base64::engine::general_purpose::STANDARD.encode(
            hex::decode("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
                .expect("valid hex"),
        );
        assert_eq!(key.sign("what do ya want for nothing?"), expected);
    }

    #[test]
    fn defaults_are_least_privilege_and_https_only() {
        let spec = SasSpec::account(expiry());
        assert_eq!(spec.permissions, Permissions::READ_LIST);
        assert_eq!(spec.protocol, Protocol::HttpsOnly);
        assert_eq!(
            SasSpec::blob("c", "b", expiry()).permissions.blob_letters(),
            "r"
        );
    }

    #[test]
    fn invalid_specs_are_refused_with_exact_messages() {
        let no_permission = SasSpec::account(expiry()).permissions(Permissions::default());
        assert_eq!(
            no_permission.sign(&key()).expect_err("refused").to_string(),
            "a SAS needs at least one permission"
        );
        let backwards = SasSpec::account(expiry()).start(expiry());
        assert_eq!(
            backwards.sign(&key()).expect_err("refused").to_string(),
            "the SAS expiry 2026-01-02T03:04:05Z is not after its start 2026-01-02T03:04:05Z"
        );
        assert_eq!(
            AccountKey::new("acct", "not base64!")
                .expect_err("refused")
                .to_string(),
            "the key of storage account acct is not valid base64"
        );
    }

    #[test]
    fn debug_output_never_shows_key_or_token() {
        let token = SasSpec::account(expiry())
            .sign(&key())
            .expect("a valid spec signs");
        let debug = format!("{:?} {:?}", key(), token);
        assert!(!debug.contains(DEV_KEY), "{debug}");
        assert!(!debug.contains(token.expose_query()), "{debug}");
        assert!(debug.contains("account: \"devstoreaccount1\""), "{debug}");
    }
}
