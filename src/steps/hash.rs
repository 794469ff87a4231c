//! A step's content hash: what decides "this step changed, run it again".
//!
//! It covers the rendered script, the non-secret parameters and the identity of each secret,
//! never a secret's value: the hash is stored in a marker on the node and may be shown in plans.
//! Every field is length-prefixed, so no two different inputs can produce the same byte string
//! (`a=bc` vs `ab=c`).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::spec::{FileContent, StepFile};

/// Hex SHA-256 over the script, the parameters and the secret identities (both sorted by name).
pub fn step_hash(
    script: &str,
    params: &BTreeMap<String, String>,
    secret_identities: &BTreeMap<&str, &str>,
) -> String {
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    field(b"dsinfra-step-v1");
    field(script.as_bytes());
    field(&(params.len() as u64).to_be_bytes());
    for (name, value) in params {
        field(name.as_bytes());
        field(value.as_bytes());
    }
    field(&(secret_identities.len() as u64).to_be_bytes());
    for (name, identity) in secret_identities {
        field(name.as_bytes());
        field(identity.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// `base` extended with the step's delivered files (names and every content, in order).
/// Without files it is `base` unchanged, so the hashes of steps without files, recorded in
/// markers on existing nodes, stay valid.
pub fn with_files(base: String, files: &[StepFile]) -> String {
    if files.is_empty() {
        return base;
    }
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    field(b"dsinfra-step-files-v1");
    field(base.as_bytes());
    field(&(files.len() as u64).to_be_bytes());
    for file in files {
        field(file.name.as_bytes());
        match &file.content {
            FileContent::Same(text) => {
                field(b"same");
                field(text.as_bytes());
            }
            FileContent::ByRank(texts) => {
                field(b"by-rank");
                field(&(texts.len() as u64).to_be_bytes());
                for text in texts {
                    field(text.as_bytes());
                }
            }
        }
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn each_input_changes_the_hash() {
        let none = BTreeMap::new();
        let base = step_hash("echo", &params(&[("a", "1")]), &none);
        assert_eq!(base.len(), 64);
        assert_eq!(base, step_hash("echo", &params(&[("a", "1")]), &none));
        assert_ne!(base, step_hash("echo ", &params(&[("a", "1")]), &none));
        assert_ne!(base, step_hash("echo", &params(&[("a", "2")]), &none));
        let secret = BTreeMap::from([("sas", "storage_account.data@v1")]);
        assert_ne!(base, step_hash("echo", &params(&[("a", "1")]), &secret));
    }

    #[test]
    fn files_change_the_hash_and_no_files_change_nothing() {
        let base = step_hash("echo", &params(&[]), &BTreeMap::new());
        assert_eq!(with_files(base.clone(), &[]), base);
        let file = |texts: &[&str]| StepFile {
            name: "shard.tsv".into(),
            content: FileContent::ByRank(texts.iter().map(|t| (*t).to_owned()).collect()),
        };
        let two = with_files(base.clone(), &[file(&["a\n", "b\n"])]);
        assert_ne!(two, base);
        assert_ne!(two, with_files(base.clone(), &[file(&["a\n", "c\n"])]));
        assert_ne!(two, with_files(base.clone(), &[file(&["a\nb\n", ""])]));
        let same = StepFile {
            name: "shard.tsv".into(),
            content: FileContent::Same("a\n".into()),
        };
        assert_ne!(
            with_files(base.clone(), &[same]),
            with_files(base, &[file(&["a\n"])])
        );
    }

    #[test]
    fn fields_cannot_run_into_each_other() {
        let none = BTreeMap::new();
        assert_ne!(
            step_hash("", &params(&[("a", "bc")]), &none),
            step_hash("", &params(&[("ab", "c")]), &none)
        );
    }
}
