//! An error as the CLI prints it: the message, then each cause the lines above do not already
//! show. The chain arrives redacted (`secret::redact_chain`); this only lays it out.

use std::fmt::Write as _;

/// An error and its causes, a line each. A cause whose words the lines above already show is
/// left out: many errors spell their source into their own message (`could not read the state
/// URL: <storage error>`), and printing it again as "caused by" says the same thing twice.
pub fn error_text(label: &str, chain: &[String]) -> String {
    let (first, causes) = chain
        .split_first()
        .map_or(("", &[][..]), |(f, c)| (f.as_str(), c));
    let mut text = format!("{label}: {first}\n");
    for cause in causes {
        if !text.contains(cause.as_str()) {
            let _ = writeln!(text, "  caused by: {cause}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;

    fn chain(err: &anyhow::Error) -> Vec<String> {
        err.chain().map(ToString::to_string).collect()
    }

    /// Regression: a remote-state failure printed the storage error twice, once inside its own
    /// message and again as "caused by".
    #[test]
    fn a_cause_the_message_already_shows_is_not_printed_again() {
        #[derive(Debug, thiserror::Error)]
        #[error("the lease is held by another writer")]
        struct Storage;
        #[derive(Debug, thiserror::Error)]
        #[error("could not lock the state https://a.blob/s: {source}")]
        struct Remote {
            #[source]
            source: Storage,
        }
        let err = anyhow::Error::new(Remote { source: Storage }).context("apply stopped");
        assert_eq!(
            error_text("error", &chain(&err)),
            "error: apply stopped\n  caused by: could not lock the state https://a.blob/s: the \
             lease is held by another writer\n"
        );
    }

    #[test]
    fn causes_with_their_own_words_are_each_printed() {
        let err = anyhow::anyhow!("the service said no")
            .context("listKeys failed")
            .context("could not sign sas.read");
        assert_eq!(
            error_text("error", &chain(&err)),
            "error: could not sign sas.read\n  caused by: listKeys failed\n  caused by: the \
             service said no\n"
        );
    }
}
