//! A blob data plane for emulated storage accounts, served by an Azurite (the Azure Storage
//! emulator) that runs next to the emulator: ARM's view of the account points at it.
//!
//! The emulator has no data plane of its own: a storage account it creates advertises
//! `https://NAME.blob.core.windows.net/`, which nothing on this machine answers. With a
//! [`BlobDataPlane`] in the configuration, an account whose name it lists instead advertises
//! Azurite's path-style URL for that account as `primaryEndpoints.blob`, and its `listKeys`
//! answers the key Azurite was started with. Everything signed with that key (Shared Key
//! requests, the SAS tokens dsinfra signs) is then checked by Azurite for real.
//!
//! Azurite only knows the accounts it was started with (`AZURITE_ACCOUNTS=name:key[:key2];...`),
//! so the names must be known before either starts: a manifest that stages through Azurite names
//! its account explicitly (`name = "stageacct"`). Accounts not listed keep the public endpoints
//! and random keys. Containers made through ARM are not created in Azurite: whoever uses the
//! data plane creates what it reads (see docs/emulator.md, "Azurite blob data plane").

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Where the blob data plane of some storage accounts is served, and the keys it knows.
#[derive(Clone, PartialEq, Eq)]
pub struct BlobDataPlane {
    /// Azurite's blob service, without the account: `http://127.0.0.1:10000`.
    pub url: String,
    /// The keys Azurite knows, by account name (lower case): key1, then key2 if given.
    pub accounts: BTreeMap<String, Vec<String>>,
}

/// Debug output never shows a key.
impl std::fmt::Debug for BlobDataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobDataPlane")
            .field("url", &self.url)
            .field("accounts", &self.accounts.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl BlobDataPlane {
    /// The data plane at `url` for the accounts of `accounts`, written as Azurite reads its
    /// `AZURITE_ACCOUNTS` variable: `name:key1[:key2]`, separated by `;`.
    ///
    /// # Errors
    ///
    /// The URL is not `http(s)://...`, or an entry has no name, no key, a key that is not
    /// base64, or a name that is not a storage account name; the text never repeats a key.
    pub fn from_azurite_accounts(url: &str, accounts: &str) -> Result<Self, String> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "{url:?} is not Azurite's blob URL: give http://HOST:PORT (e.g. http://127.0.0.1:10000)"
            ));
        }
        let mut parsed = BTreeMap::new();
        for (i, entry) in accounts
            .split(';')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .enumerate()
        {
            let mut parts = entry.split(':');
            let name = parts.next().unwrap_or_default().to_ascii_lowercase();
            if !valid_account_name(&name) {
                return Err(format!(
                    "entry {} of the Azurite accounts names {name:?}, not a storage account name \
                     (3-24 lower-case letters and digits)",
                    i + 1
                ));
            }
            let keys: Vec<String> = parts.map(str::to_owned).collect();
            if keys.is_empty() || keys.len() > 2 {
                return Err(format!(
                    "the Azurite account {name} needs one or two keys: name:key1[:key2]"
                ));
            }
            if keys.iter().any(|k| STANDARD.decode(k).is_err()) {
                return Err(format!(
                    "a key of the Azurite account {name} is not base64, as storage keys are"
                ));
            }
            parsed.insert(name, keys);
        }
        if parsed.is_empty() {
            return Err(
                "no Azurite accounts: set AZURITE_ACCOUNTS=name:key (the variable Azurite reads)"
                    .to_owned(),
            );
        }
        Ok(Self {
            url: url.trim_end_matches('/').to_owned(),
            accounts: parsed,
        })
    }

    /// The keys Azurite knows for `account`, if it serves it.
    pub fn keys_of(&self, account: &str) -> Option<&[String]> {
        self.accounts
            .get(&account.to_ascii_lowercase())
            .map(Vec::as_slice)
    }

    /// The account's blob endpoint as ARM would advertise it, path-style as Azurite serves it
    /// (`http://127.0.0.1:10000/NAME/`), if Azurite serves the account.
    pub fn blob_endpoint(&self, account: &str) -> Option<String> {
        self.keys_of(account)
            .map(|_| format!("{}/{}/", self.url, account.to_ascii_lowercase()))
    }
}

/// ARM's rule: 3-24 characters, lower-case letters and digits only.
pub(crate) fn valid_account_name(name: &str) -> bool {
    (3..=24).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "a2V5MQ==";

    #[test]
    fn accounts_are_read_as_azurite_reads_them() {
        let plane = BlobDataPlane::from_azurite_accounts(
            "http://127.0.0.1:10000/",
            &format!("stageacct:{KEY};Other2:{KEY}:a2V5Mg==;"),
        )
        .expect("valid");
        assert_eq!(plane.url, "http://127.0.0.1:10000");
        assert_eq!(plane.keys_of("STAGEACCT"), Some(&[KEY.to_owned()][..]));
        assert_eq!(plane.keys_of("other2").map(<[String]>::len), Some(2));
        assert_eq!(
            plane.blob_endpoint("stageacct").as_deref(),
            Some("http://127.0.0.1:10000/stageacct/")
        );
        assert_eq!(plane.blob_endpoint("elsewhere"), None);
        assert!(!format!("{plane:?}").contains(KEY));
    }

    #[test]
    fn bad_entries_say_what_is_wrong_without_the_key() {
        let err = |url: &str, accounts: &str| {
            BlobDataPlane::from_azurite_accounts(url, accounts).expect_err("invalid")
        };
        assert!(err("127.0.0.1:10000", "a1b:a2V5").contains("http://HOST:PORT"));
        assert!(err("http://h:1", "").contains("AZURITE_ACCOUNTS"));
        assert!(err("http://h:1", "Bad_Name:a2V5").contains("not a storage account name"));
        assert!(err("http://h:1", "abc").contains("one or two keys"));
        let secretish = err("http://h:1", "abc:not*base64");
        assert!(secretish.contains("not base64") && !secretish.contains("not*base64"));
    }
}
