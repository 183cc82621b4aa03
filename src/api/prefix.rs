//! The one rule for naming a thing by its hex id or a unique prefix of it
//! (`mesh vote ID`, `mesh invite revoke ID`): case-insensitive, never empty,
//! and an ambiguous prefix is refused rather than guessed.

use super::ApiError;

/// The one item whose hex id starts with `wanted`. `what` names the kind of
/// item in the errors ("open proposal", "invite") and `listing` the command
/// that lists them.
pub fn resolve<T: Copy>(
    wanted: &str,
    items: impl IntoIterator<Item = (String, T)>,
    what: &str,
    listing: &str,
) -> Result<T, ApiError> {
    let wanted_lower = wanted.trim().to_ascii_lowercase();
    if wanted_lower.is_empty() {
        return Err(ApiError::bad_request(format!(
            "no {what} id given (see `{listing}`)"
        )));
    }
    let matching: Vec<T> = items
        .into_iter()
        .filter(|(id, _)| id.to_ascii_lowercase().starts_with(&wanted_lower))
        .map(|(_, item)| item)
        .collect();
    match matching.as_slice() {
        [one] => Ok(*one),
        [] => Err(ApiError::not_found(format!(
            "no {what} `{wanted}` (see `{listing}`)"
        ))),
        many => Err(ApiError::bad_request(format!(
            "`{wanted}` matches {} {what}s; give more of it",
            many.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Vec<(String, u8)> {
        vec![("ab12".into(), 1), ("ab34".into(), 2), ("cd56".into(), 3)]
    }

    #[test]
    fn a_unique_prefix_names_one_item() {
        assert_eq!(resolve("CD", ids(), "invite", "x").unwrap(), 3);
        assert_eq!(resolve("ab3", ids(), "invite", "x").unwrap(), 2);
        assert_eq!(resolve("ab34", ids(), "invite", "x").unwrap(), 2);
    }

    #[test]
    fn ambiguous_missing_and_empty_prefixes_are_refused() {
        let e = resolve("ab", ids(), "invite", "x").unwrap_err();
        assert!(e.message.contains("matches 2 invites"), "{e}");
        let e = resolve("ef", ids(), "invite", "grove mesh invite list").unwrap_err();
        assert!(e.message.contains("no invite `ef`"), "{e}");
        assert!(resolve(" ", ids(), "invite", "x").is_err());
    }
}
