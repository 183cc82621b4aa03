//! Unicode character classes from regex-syntax's tables, so every rule that
//! sorts characters by general category follows one Unicode version.

/// A set of characters: sorted, disjoint inclusive ranges.
#[derive(Debug, Clone)]
pub struct CharClass(Vec<(char, char)>);

impl CharClass {
    /// The class a regex character class such as `[\p{L}\p{N}]` names.
    /// Patterns are constants of this crate: regex-syntax built with
    /// `unicode-gencat` always parses them, so a failure is a build
    /// misconfiguration (and panics at first use, in every test).
    pub fn unicode(pattern: &str) -> CharClass {
        match regex_syntax::parse(pattern).map(|hir| hir.into_kind()) {
            Ok(regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(class))) => {
                CharClass(
                    class
                        .ranges()
                        .iter()
                        .map(|r| (r.start(), r.end()))
                        .collect(),
                )
            }
            other => panic!("regex-syntax cannot build the class {pattern}: {other:?}"),
        }
    }

    pub fn contains(&self, c: char) -> bool {
        self.0
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }
}
