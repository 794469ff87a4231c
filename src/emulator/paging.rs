//! Paging of list answers as ARM does it: at most [`EmulatorConfig::page_size`] items per
//! answer, and a `nextLink` while more remain.
//!
//! Every list handler builds its whole list and hands it to [`page`], so all lists page alike.
//! The `nextLink` is the request's own URL on the request's own origin (the `Host` it was sent
//! to), with a `$skiptoken` naming where the next page starts: a client that reached the
//! emulator as `localhost` is sent back to `localhost`, and one that follows the link gets the
//! same filters and api-version. The token is the index of the next item. ARM's tokens are
//! opaque and ARM does not promise a snapshot either: a list that changes between pages may skip
//! or repeat an item there as here.
//!
//! [`EmulatorConfig::page_size`]: super::EmulatorConfig::page_size

use serde_json::{Value, json};

use super::error::ArmError;
use super::http::{Ctx, Reply};
use super::path::percent_decode;

/// The query parameter carrying the continuation token.
const SKIP_TOKEN: &str = "$skiptoken";

/// Answers one page of `items` for the list request in `ctx`: `{"value": [...]}`, plus
/// `nextLink` when items remain after this page. A `$skiptoken` the emulator did not hand out
/// is refused with 400, as ARM refuses a token it cannot read.
pub(crate) fn page(ctx: &Ctx<'_>, items: Vec<Value>) -> Result<Reply, ArmError> {
    page_of(ctx, items, None)
}

/// [`page`] with pages of at most `top` items, for lists whose `$top` sets the page size (the
/// generic resource lists): the `nextLink` keeps `$top`, so every page has the same size.
pub(crate) fn page_of(
    ctx: &Ctx<'_>,
    items: Vec<Value>,
    top: Option<usize>,
) -> Result<Reply, ArmError> {
    page_with(ctx, items, top, |item| item)
}

/// [`page`] for a long list whose items are costly to render: `items` are cheap keys, and only
/// those on the page asked for become JSON, through `render`.
pub(crate) fn page_built<T>(
    ctx: &Ctx<'_>,
    items: Vec<T>,
    render: impl Fn(T) -> Value,
) -> Result<Reply, ArmError> {
    page_with(ctx, items, None, render)
}

fn page_with<T>(
    ctx: &Ctx<'_>,
    items: Vec<T>,
    top: Option<usize>,
    render: impl Fn(T) -> Value,
) -> Result<Reply, ArmError> {
    let start = match ctx.query(SKIP_TOKEN) {
        None => 0,
        Some(token) => token.parse::<usize>().map_err(|_| bad_token(token))?,
    };
    // A page size of 0 would never progress; the CLI refuses it, and a library user gets 1.
    let size = top
        .map_or(ctx.config.page_size, |top| top.min(ctx.config.page_size))
        .max(1);
    let total = items.len();
    let value: Vec<Value> = items
        .into_iter()
        .skip(start)
        .take(size)
        .map(render)
        .collect();
    let next = start.saturating_add(size);
    let mut body = json!({ "value": value });
    if next < total {
        body["nextLink"] = Value::String(next_link(ctx, next));
    }
    Ok(Reply::json(200, body))
}

/// The request's URL with `$skiptoken` set to `next`; every other query pair is kept as sent.
fn next_link(ctx: &Ctx<'_>, next: usize) -> String {
    let mut pairs: Vec<&str> = ctx
        .uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            !percent_decode(key).eq_ignore_ascii_case(SKIP_TOKEN)
        })
        .collect();
    let token = format!("{SKIP_TOKEN}={next}");
    pairs.push(&token);
    format!("{}{}?{}", ctx.origin, ctx.uri.path(), pairs.join("&"))
}

fn bad_token(token: &str) -> ArmError {
    ArmError::new(
        400,
        "InvalidSkipToken",
        format!(
            "The skip token '{token}' is not valid. Use the nextLink of the previous page as it was returned."
        ),
    )
}
