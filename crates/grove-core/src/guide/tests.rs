//! Tests of `guide`.

use super::*;

/// The default rules, with tags followed by any text (most tests feed
/// ` [s1]` then a word), any words, and no end after the sentence that
/// follows a quote; `tag_ends_clause`, `english_words` and
/// `sentences_after_quote` have their own tests.
fn rules() -> GuideRules {
    GuideRules {
        tag_ends_clause: false,
        english_words: false,
        sentences_after_quote: None,
        ..GuideRules::default()
    }
}

/// A small hand-made vocabulary: every printable ASCII byte alone, some
/// words, quote and tag pieces, and a stop token.
fn vocab() -> (Arc<Vocabulary>, Vec<String>) {
    let mut words: Vec<String> = (32u8..127).map(|b| (b as char).to_string()).collect();
    for w in [
        " the",
        " whale",
        " sea",
        " rose",
        " from",
        " at",
        " dawn",
        "The",
        " The",
        " \"",
        "\"The",
        " \"The",
        "\".",
        ".\"",
        " [",
        "[s",
        "s1",
        "s2",
        "]",
        "].",
        " [s1]",
        "ing",
        " call",
        " me",
        " Ishmael",
        " ZAN",
        "IES",
        "Call",
        " \"Call",
        "'s",
        " we",
        " said",
        "at",
        " all",
        " here",
        " answer",
        " point",
        " directly",
        "your",
        " move",
        ":",
        " now",
        " and",
        " was",
        " calm",
        "  we",
        "...",
        "\n",
        "\u{1}",
        " \u{7f}x",
        "<|im_end|>",
    ] {
        words.push(w.to_string());
    }
    let stop = (words.len() - 1) as u32;
    let tokens = words
        .iter()
        .enumerate()
        .map(|(i, w)| (i as u32 != stop).then(|| w.as_bytes().to_vec()))
        .collect();
    (Arc::new(Vocabulary::new(tokens, &[stop])), words)
}

fn id(words: &[String], w: &str) -> u32 {
    words.iter().position(|x| x == w).expect(w) as u32
}

fn guide(passages: &[&str], max_tokens: usize) -> (QuoteGuide, Vec<String>) {
    guide_with(
        Guidance {
            passages: passages.iter().map(|p| p.to_string()).collect(),
            ..Guidance::default()
        },
        max_tokens,
        rules(),
    )
}

/// A guide quoting [`WHALE`] under `rules`.
fn whale_guide(rules: GuideRules) -> (QuoteGuide, Vec<String>) {
    guide_with(
        Guidance {
            passages: vec![WHALE.to_string()],
            ..Guidance::default()
        },
        200,
        rules,
    )
}

fn guide_with(
    guidance: Guidance,
    max_tokens: usize,
    rules: GuideRules,
) -> (QuoteGuide, Vec<String>) {
    let (vocab, words) = vocab();
    (QuoteGuide::new(vocab, &guidance, max_tokens, rules), words)
}

/// The ids the guide allows at this step.
fn allowed(g: &mut QuoteGuide) -> Vec<u32> {
    let mut logits = vec![0.0f32; g.vocab.len()];
    g.constrain(&mut logits);
    (0..logits.len() as u32)
        .filter(|&i| logits[i as usize].is_finite())
        .collect()
}

fn allows(g: &mut QuoteGuide, words: &[String], w: &str) -> bool {
    allowed(g).contains(&id(words, w))
}

/// Feeds a text one character at a time.
fn feed_chars(g: &mut QuoteGuide, words: &[String], text: &str) {
    for c in text.chars() {
        feed(g, words, &[c.to_string().as_str()]);
    }
}

/// Feeds tokens, checking each is allowed first.
fn feed(g: &mut QuoteGuide, words: &[String], tokens: &[&str]) -> GuideControl {
    let mut control = GuideControl::Continue;
    for t in tokens {
        assert!(allows(g, words, t), "{t:?} refused after {:?}", g.text());
        control = g.accept(id(words, t));
    }
    control
}

/// Clause boundaries after `dawn` and at the end.
const WHALE: &str = "The whale rose at dawn, from the sea.";

#[test]
fn the_tag_grammar_names_only_this_turns_passages() {
    let tags: Vec<String> = ["s1", "s2", "s3"].map(String::from).to_vec();
    let g = tag_grammar(&tags);
    assert!(
        g.contains(r#"tag ::= "s1" | "s2" | "s3" | "o" [0-9]+"#),
        "{g}"
    );
    assert!(g.contains(r"text ::= [^\[\]]"), "{g}");
    assert!(!g.contains("s4"));
}

#[test]
fn only_verbatim_continuations_inside_a_quote() {
    let (mut g, w) = guide(&[WHALE], 100);
    feed(&mut g, &w, &["I", " \"The", " whale"]);
    assert!(allows(&mut g, &w, " rose"));
    assert!(!allows(&mut g, &w, " at"), "skips a word");
    assert!(!allows(&mut g, &w, " the"));
    assert!(!allows(&mut g, &w, "s"), "`whales` is not in the passage");
    // Starts only where a clause starts: neither `"hale` nor `"whale`.
    let (mut g, w) = guide(&[WHALE], 100);
    feed(&mut g, &w, &["I", " \""]);
    assert!(!allows(&mut g, &w, "h"));
    assert!(!allows(&mut g, &w, "w"));
    // The first letter's case may differ (norm lowercases).
    assert!(allows(&mut g, &w, "t"));
    assert!(allows(&mut g, &w, "T"));
    assert!(!allows(&mut g, &w, " "), "no space just inside the mark");
}

#[test]
fn a_quote_closes_only_at_a_clause_boundary_after_four_words() {
    let (mut g, w) = guide(&[WHALE], 100);
    feed(&mut g, &w, &["I", " \"The", " whale", " rose"]);
    assert!(!allows(&mut g, &w, "\""), "three words");
    feed(&mut g, &w, &[" at"]);
    assert!(!allows(&mut g, &w, "\""), "four words, but mid-clause");
    feed(&mut g, &w, &[" ", "d", "a"]);
    assert!(!allows(&mut g, &w, "\""), "inside `dawn`");
    feed(&mut g, &w, &["w", "n"]);
    assert!(allows(&mut g, &w, "\""), "before the comma");
    feed(&mut g, &w, &[","]);
    assert!(allows(&mut g, &w, "\""), "after the comma");
    feed(&mut g, &w, &[" "]);
    assert!(
        !allows(&mut g, &w, "\""),
        "never a space just inside the mark"
    );
    // Four words to the passage's end: `from the sea.` starts a clause but
    // has three, so no quote starts at `from`; none starts mid-clause
    // (`dawn, from the sea.`), and one starts at the sentence's start.
    let (mut g, w) = guide(&[WHALE], 100);
    feed(&mut g, &w, &["I", " \""]);
    assert!(!allows(&mut g, &w, "f"));
    assert!(!allows(&mut g, &w, "d"), "`dawn` is inside a clause");
    assert!(allows(&mut g, &w, "The"));
}

#[test]
fn a_closed_quote_forces_its_tag() {
    let other = "Nothing here but a lighthouse.";
    let (mut g, w) = guide(&[other, WHALE], 100);
    feed(
        &mut g,
        &w,
        &["I", " \"The", " whale", " rose", " at", " dawn", "\""],
    );
    // Only the pieces of ` [s2]` (the passage holding the quote).
    let now: Vec<String> = allowed(&mut g)
        .iter()
        .map(|&i| w[i as usize].clone())
        .collect();
    assert_eq!(now, [" ", " ["], "{now:?}");
    feed(&mut g, &w, &[" [", "s"]);
    assert!(!allows(&mut g, &w, "1"));
    feed(&mut g, &w, &["2"]);
    assert!(allows(&mut g, &w, "]"));
    assert!(allows(&mut g, &w, "]."), "may run on into a full stop");
    feed(&mut g, &w, &["]."]);
    assert_eq!(g.text(), "I \"The whale rose at dawn\" [s2].");
    assert_eq!(g.counts().passage_quotes, 1);
    let grading = crate::grounding::grade(
        &g.text(),
        &crate::grounding::TurnSources {
            passage_tags: &["s1", "s2"],
            pool: &[other, WHALE],
            other_turns: &BTreeMap::new(),
            own_turns: &BTreeMap::new(),
        },
    );
    assert!(grading.passes(), "{grading:?}");
}

#[test]
fn brackets_outside_quotes_only_open_valid_tags() {
    // By default tags follow quotes only.
    let (mut g, w) = guide(&[WHALE], 100);
    feed(&mut g, &w, &["I"]);
    assert!(!allows(&mut g, &w, " ["));
    assert!(!allows(&mut g, &w, "[s"));
    let free_tags = || {
        guide_with(
            Guidance {
                passages: vec![WHALE.to_string()],
                ..Guidance::default()
            },
            100,
            GuideRules {
                free_tags: true,
                ..rules()
            },
        )
    };
    let (mut g, w) = free_tags();
    assert!(!allows(&mut g, &w, "[s"), "no tag before the first word");
    feed(&mut g, &w, &["I"]);
    assert!(allows(&mut g, &w, " ["));
    assert!(!allows(&mut g, &w, "]"));
    feed(&mut g, &w, &[" [", "s"]);
    assert!(allows(&mut g, &w, "1"));
    assert!(!allows(&mut g, &w, "2"), "only s1 exists");
    // `[s` straight into `s2`? No: only `s1` continues.
    let (mut g, w) = free_tags();
    feed(&mut g, &w, &["I"]);
    assert!(allows(&mut g, &w, "[s"));
    feed(&mut g, &w, &["[s"]);
    assert!(allows(&mut g, &w, "1"));
    assert!(!allows(&mut g, &w, "s2"));
}

#[test]
fn at_most_two_quotes_with_own_words_between() {
    let (mut g, w) = guide(
        &["one two three four, five six seven eight, nine ten eleven twelve."],
        200,
    );
    feed(&mut g, &w, &["I"]);
    feed(&mut g, &w, &[" \""]);
    feed_chars(&mut g, &w, "one two three four");
    feed(&mut g, &w, &["\"", " [s1]", " we"]);
    assert!(!allows(&mut g, &w, " \""), "no quote right after a quote");
    feed(&mut g, &w, &[" said", " all", " here"]);
    feed(&mut g, &w, &[" \""]);
    feed_chars(&mut g, &w, "five six seven eight");
    feed(
        &mut g,
        &w,
        &["\"", " [s1]", " we", " said", " all", " here"],
    );
    assert_eq!(g.counts().quotes, 2);
    assert!(!allows(&mut g, &w, " \""));
    assert!(!allows(&mut g, &w, "\""));
    assert!(allows(&mut g, &w, " said"));
    // After the last quote the turn ends at its next sentence end.
    assert_eq!(feed(&mut g, &w, &["."]), GuideControl::Stop);
}

#[test]
fn guidance_opens_a_quote_after_the_first_sentence() {
    let (mut g, w) = guide(&[WHALE], 200);
    feed(&mut g, &w, &["I", " said"]);
    // Before the sentence ends the model writes freely.
    assert!(allows(&mut g, &w, " we"));
    feed(&mut g, &w, &["."]);
    let now = allowed(&mut g);
    assert!(now.contains(&id(&w, " \"The")));
    assert!(now.contains(&id(&w, " \"")));
    assert!(!now.contains(&id(&w, " we")), "a quote must open now");
    assert!(
        now.iter().all(|&i| w[i as usize].starts_with(" \"")),
        "{:?}",
        now.iter().map(|&i| &w[i as usize]).collect::<Vec<_>>()
    );
    // A quote starts where a clause does (`whale` would be mid-clause).
    feed(&mut g, &w, &[" \""]);
    assert!(!allows(&mut g, &w, "w"));
    feed(&mut g, &w, &["The"]);
    assert_eq!(g.counts().forced_openings, 1);
}

#[test]
fn guidance_opens_a_quote_after_a_bounded_number_of_tokens() {
    let (mut g, w) = guide(&[WHALE], 200);
    let rules = rules();
    for _ in 0..rules.open_after_tokens {
        feed(&mut g, &w, &[" we"]);
    }
    // Not inside a word: `we` may go on (`went`)...
    assert!(allows(&mut g, &w, " we"));
    feed(&mut g, &w, &[","]);
    // ...but after it the quote opens.
    assert!(!allows(&mut g, &w, " we"));
    assert!(allows(&mut g, &w, " \"The"));
}

#[test]
fn the_turn_ends_only_after_a_passage_quote_at_a_sentence_end() {
    let (mut g, w) = guide(&[WHALE], 200);
    let stop = *g.vocab.stops.first().expect("a stop token");
    feed(&mut g, &w, &["I"]);
    assert!(!allowed(&mut g).contains(&stop), "no quote yet");
    feed(
        &mut g,
        &w,
        &[" \"The", " whale", " rose", " at", " dawn", "\""],
    );
    assert!(!allowed(&mut g).contains(&stop), "inside the forced tag");
    feed(&mut g, &w, &[" [s1]", " we"]);
    assert!(!allowed(&mut g).contains(&stop), "mid-sentence");
    feed(&mut g, &w, &["."]);
    assert!(allowed(&mut g).contains(&stop));
}

#[test]
fn near_the_budget_the_turn_ends_at_a_sentence_end() {
    let (mut g, w) = guide(&[WHALE], 30);
    // 30 tokens: the opening is forced at once (open_reserve).
    let control = feed(
        &mut g,
        &w,
        &[
            "\"The", " whale", " rose", " at", " dawn", "\"", " [s1]", " we", " said",
        ],
    );
    assert_eq!(control, GuideControl::Continue);
    assert_eq!(feed(&mut g, &w, &["."]), GuideControl::Stop);
    assert!(g.counts().ended);
}

#[test]
fn the_last_tokens_end_the_sentence_with_one_mark_never_an_ellipsis() {
    let (mut g, w) = guide(&[WHALE], 11);
    let tokens = [
        "\"The", " whale", " rose", " at", " dawn", "\"", " [s1]", " we", " said",
    ];
    assert_eq!(feed(&mut g, &w, &tokens), GuideControl::Continue);
    let now: Vec<&str> = allowed(&mut g)
        .iter()
        .map(|&i| w[i as usize].as_str())
        .collect();
    assert!(now.contains(&"."), "{now:?}");
    assert!(!now.contains(&"..."), "{now:?}");
    assert!(!now.contains(&","), "{now:?}");
}

#[test]
fn quotes_open_only_where_a_boundary_is_within_the_word_cap() {
    let text = "one two three four five, six seven eight nine ten eleven twelve thirteen fourteen.";
    let rules = GuideRules {
        max_quote_words: 6,
        ..rules()
    };
    let guidance = Guidance {
        passages: vec![text.into()],
        ..Guidance::default()
    };
    let (mut g, w) = guide_with(guidance.clone(), 200, rules.clone());
    feed(&mut g, &w, &["\""]);
    // `six` and `seven` are 9 and 8 words from the next boundary.
    assert!(!allows(&mut g, &w, "s"));
    // `nine ... fourteen.` (6 words) and `eleven ... fourteen.` start
    // inside a clause.
    assert!(!allows(&mut g, &w, "n"));
    assert!(!allows(&mut g, &w, "e"));
    assert!(allows(&mut g, &w, "o"), "`one ... five,`, 5 words");
    feed_chars(&mut g, &w, "one two three four five");
    // The quote may not run past `five,`: it closes there.
    let now: Vec<&str> = allowed(&mut g)
        .iter()
        .map(|&i| w[i as usize].as_str())
        .collect();
    assert!(now.contains(&"\""), "{now:?}");
    assert!(now.contains(&","), "{now:?}");
    assert!(!now.contains(&" "), "{now:?}");
    feed(&mut g, &w, &[","]);
    let now: Vec<&str> = allowed(&mut g)
        .iter()
        .map(|&i| w[i as usize].as_str())
        .collect();
    assert!(now.iter().all(|t| t.starts_with('"')), "{now:?}");
}

#[test]
fn a_quote_goes_past_an_end_only_when_the_tokens_left_reach_the_next() {
    // Ends after `four,` and after `ten.` (`, five ... ten.` is 30
    // bytes, about 10 tokens, plus 14 for the close).
    let text = "one two three four, five six seven eight nine ten.";
    let (mut g, w) = guide(&[text], 200);
    feed(&mut g, &w, &["\""]);
    feed_chars(&mut g, &w, "one two three four");
    assert!(allows(&mut g, &w, ","));
    assert!(allows(&mut g, &w, "\""));
    let (mut g, w) = guide(&[text], 40);
    feed(&mut g, &w, &["\""]);
    feed_chars(&mut g, &w, "one two three four");
    // 40 - 19 = 21 tokens left: enough to take the comma, not for
    // `five ... ten.` too; so after the comma the quote closes.
    let now = |g: &mut QuoteGuide| -> Vec<String> {
        allowed(g).iter().map(|&i| w[i as usize].clone()).collect()
    };
    assert_eq!(now(&mut g), ["\"", ","]);
    feed(&mut g, &w, &[","]);
    assert_eq!(now(&mut g), ["\""], "closes here");
}

#[test]
fn quotes_do_not_cross_quote_marks_or_newlines_matter_not() {
    // Line breaks in the source read as spaces; a quote mark inside the
    // source ends what a quote can copy (and is a boundary).
    let text = "The whale\nrose from \u{201C}the sea at dawn\u{201D} said we";
    let (mut g, w) = guide(&[text], 200);
    feed(&mut g, &w, &["I", " \"The", " whale", " rose", " from"]);
    assert!(!allows(&mut g, &w, " the"));
    assert!(allows(&mut g, &w, "\""));
    feed(&mut g, &w, &["\""]);
    assert!(g.text().ends_with("\"The whale rose from\""));
}

#[test]
fn moot_quotes_are_tagged_with_their_turn() {
    let guidance = Guidance {
        passages: vec!["Nothing here, about it at all here.".into()],
        turns: BTreeMap::from([(3, "Call me Ishmael now, the whale said.".to_string())]),
        ..Guidance::default()
    };
    let (mut g, w) = guide_with(guidance, 200, rules());
    feed(&mut g, &w, &["I"]);
    // The first quote must come from a passage.
    assert!(!allows(&mut g, &w, " \"Call"));
    feed(&mut g, &w, &[" \""]);
    feed_chars(&mut g, &w, "about it at all here");
    feed(
        &mut g,
        &w,
        &["\"", " [", "s", "1", "]", " we", " said", " all", " now"],
    );
    feed(&mut g, &w, &[" \"Call", " me", " Ishmael", " now", "\""]);
    for c in [" ", "[", "o", "3", "]"] {
        feed(&mut g, &w, &[c]);
    }
    assert_eq!(
        g.text(),
        "I \"about it at all here\" [s1] we said all now \"Call me Ishmael now\" [o3]"
    );
    assert_eq!(g.counts().quotes, 2);
    assert_eq!(g.counts().passage_quotes, 1);
}

#[test]
fn a_forced_tag_ends_a_clause() {
    let (mut g, w) = whale_guide(GuideRules::default());
    feed(
        &mut g,
        &w,
        &[
            "I", " said", " \"The", " whale", " rose", " at", " dawn", "\"",
        ],
    );
    feed(&mut g, &w, &[" [s1]"]);
    assert!(
        !allows(&mut g, &w, " we"),
        "no talk about the quote after its tag"
    );
    assert!(allows(&mut g, &w, ","));
    assert!(allows(&mut g, &w, "."));
    feed(&mut g, &w, &[",", " we"]);
    // A quote that ends its sentence needs no mark after its tag.
    let (mut g, w) = whale_guide(GuideRules::default());
    feed(
        &mut g,
        &w,
        &[
            "I", " said", " \"The", " whale", " rose", " at", " dawn", ",", " from", " the",
            " sea", ".", "\"", " [s1]",
        ],
    );
    assert!(allows(&mut g, &w, " we"));
    assert!(!allows(&mut g, &w, "."), "no `.\" [s1].`");
}

#[test]
fn free_text_writes_english_words_and_its_sources_words_only() {
    let guidance = Guidance {
        passages: vec!["Call me Ishmael, said the qzx.".to_string()],
        known_words: Some(vec!["ishmael".into(), "qzx".into()]),
        ..Guidance::default()
    };
    let rules = GuideRules {
        english_words: true,
        ..rules()
    };
    let (mut g, w) = guide_with(guidance.clone(), 200, rules.clone());
    feed(&mut g, &w, &["I", " ", "q"]);
    // `qz` starts an English word nowhere, but `qzx` is a source's word.
    assert!(allows(&mut g, &w, "u"));
    feed(&mut g, &w, &["z"]);
    assert!(
        !allows(&mut g, &w, " "),
        "`qz` is not a word: it may not end"
    );
    assert!(!allows(&mut g, &w, "."));
    assert!(!allows(&mut g, &w, "q"), "nor go on towards no word");
    feed(&mut g, &w, &["x", " ", "w", "h", "a"]);
    assert!(!allows(&mut g, &w, " "), "`wha` is no word");
    assert!(!allows(&mut g, &w, "q"));
    feed(&mut g, &w, &["l", "e", "'s", " sea"]);
    // A token that starts a word after a gap starts an English one.
    let mut g2 = guide_with(guidance, 200, rules).0;
    feed(&mut g2, &w, &["I"]);
    assert!(allows(&mut g2, &w, " whale"));
    assert!(allows(&mut g2, &w, " Ishmael"));
    assert!(!allows(&mut g2, &w, "q"), "`Iq` starts no word");
}

#[test]
fn free_text_holds_no_colons_ellipses_or_single_quoted_quotations() {
    let (mut g, w) = guide(&[WHALE], 200);
    feed(&mut g, &w, &["I", " said"]);
    assert!(!allows(&mut g, &w, ":"));
    assert!(
        !allows(&mut g, &w, "  we"),
        "a token holding a double space"
    );
    feed(&mut g, &w, &[" "]);
    assert!(
        !allows(&mut g, &w, "'"),
        "a single quote opening a quotation"
    );
    assert!(!allows(&mut g, &w, "'s"));
    assert!(!allows(&mut g, &w, " we"), "no double space");
    feed(&mut g, &w, &["w", "e"]);
    assert!(allows(&mut g, &w, "'s"), "an apostrophe after a word");
    feed(&mut g, &w, &["."]);
    assert!(!allows(&mut g, &w, "."), "no ellipsis of single dots");
}

#[test]
fn after_a_quote_the_turn_ends_with_the_sentence_that_follows() {
    let rules = GuideRules {
        sentences_after_quote: Some(1),
        ..rules()
    };
    let (mut g, w) = whale_guide(rules);
    feed(
        &mut g,
        &w,
        &[
            "I", " said", " \"The", " whale", " rose", " at", " dawn", "\"",
        ],
    );
    feed(&mut g, &w, &[" [s1]", " we", " said"]);
    assert_eq!(feed(&mut g, &w, &["."]), GuideControl::Stop);
}

#[test]
fn free_text_writes_no_control_characters() {
    let (mut g, w) = whale_guide(rules());
    feed(&mut g, &w, &["I", " said"]);
    assert!(allows(&mut g, &w, " the"));
    assert!(!allows(&mut g, &w, "\u{1}"));
    assert!(!allows(&mut g, &w, " \u{7f}x"));
}

#[test]
fn by_default_the_turn_ends_with_the_sentence_that_holds_its_quote() {
    let rules = GuideRules {
        sentences_after_quote: Some(0),
        ..rules()
    };
    let (mut g, w) = whale_guide(rules.clone());
    feed(
        &mut g,
        &w,
        &[
            "I", " said", " \"The", " whale", " rose", " at", " dawn", "\"",
        ],
    );
    assert_eq!(
        feed(&mut g, &w, &[" [s1]", " we", " said"]),
        GuideControl::Continue
    );
    assert_eq!(feed(&mut g, &w, &["."]), GuideControl::Stop);
    // A quote that ends its own sentence ends the turn at its tag.
    let (mut g, w) = whale_guide(rules);
    feed(
        &mut g,
        &w,
        &[
            "I", " said", " \"The", " whale", " rose", " at", " dawn", ",", " from", " the",
            " sea", ".",
        ],
    );
    assert_eq!(feed(&mut g, &w, &["\"", " [s1]"]), GuideControl::Stop);
}

#[test]
fn banned_words_stay_out_of_free_text_but_not_quotes() {
    let guidance = Guidance {
        passages: vec![WHALE.to_string()],
        banned_words: vec!["whale".into(), "sea".into()],
        ..Guidance::default()
    };
    let (mut g, w) = guide_with(guidance, 200, rules());
    feed(&mut g, &w, &["I"]);
    assert!(!allows(&mut g, &w, " whale"));
    assert!(!allows(&mut g, &w, " sea"));
    assert!(allows(&mut g, &w, " said"));
    feed(&mut g, &w, &[" ", "s", "e"]);
    assert!(!allows(&mut g, &w, "a"), "`se` may not become `sea`");
    assert!(allows(&mut g, &w, "t"));
    feed(&mut g, &w, &["t", " \"The", " whale"]);
}

#[test]
fn the_turn_ends_only_after_a_topic_word() {
    let guidance = Guidance {
        passages: vec![WHALE.to_string()],
        steer_words: vec!["calm".into()],
        ..Guidance::default()
    };
    let (mut g, w) = guide_with(
        guidance,
        200,
        GuideRules {
            topic_before_end: true,
            ..rules()
        },
    );
    feed(
        &mut g,
        &w,
        &["I", " said", " \"The", " whale", " rose", " at", " dawn"],
    );
    feed(
        &mut g,
        &w,
        &["\"", " [s1]", " we", " said", " all", " here"],
    );
    feed(&mut g, &w, &["."]);
    assert!(!allows(&mut g, &w, "<|im_end|>"), "no topic word yet");
    feed(&mut g, &w, &[" calm", "."]);
    assert!(allows(&mut g, &w, "<|im_end|>"));
}

#[test]
fn the_same_words_are_not_quoted_twice() {
    let (mut g, w) = guide(&["The whale rose at dawn, and the sea was calm."], 200);
    feed(
        &mut g,
        &w,
        &[
            "I", " \"The", " whale", " rose", " at", " dawn", "\"", " [s1]", " we", " said",
            " all", " here",
        ],
    );
    feed(&mut g, &w, &[" \""]);
    // `The whale rose at dawn` was quoted: no quote starts inside it again...
    assert!(!allows(&mut g, &w, "w"));
    assert!(!allows(&mut g, &w, "r"));
    // ...but `and the sea was calm.` is still free (and `the sea` starts
    // inside its clause).
    assert!(allows(&mut g, &w, "a"));
    assert!(!allows(&mut g, &w, "t"));
}

#[test]
fn a_reply_is_one_paragraph() {
    let (mut g, w) = guide(&[WHALE], 200);
    feed(&mut g, &w, &["I", " said", "."]);
    feed(
        &mut g,
        &w,
        &[" \"The", " whale", " rose", " at", " dawn", "\"", " [s1]"],
    );
    assert!(!allows(&mut g, &w, "\n"));
    assert!(allows(&mut g, &w, " we"));
    let rules = GuideRules {
        one_paragraph: false,
        ..rules()
    };
    let guidance = Guidance {
        passages: vec![WHALE.into()],
        ..Guidance::default()
    };
    let (mut g, w) = guide_with(guidance, 200, rules);
    feed(&mut g, &w, &["I", "\n"]);
}

/// A guide whose free text may not copy `avoid` (and the passage).
fn copy_guide(avoid: &str, exempt: &[&str]) -> (QuoteGuide, Vec<String>) {
    guide_with(
        Guidance {
            passages: vec![WHALE.into()],
            avoid: vec![avoid.into()],
            exempt: exempt.iter().map(|t| t.to_string()).collect(),
            ..Guidance::default()
        },
        200,
        rules(),
    )
}

#[test]
fn names_inside_a_sentence_and_numerals_must_be_known() {
    let (mut g, w) = guide_with(
        Guidance {
            passages: vec![WHALE.into()],
            known_words: Some(vec!["ishmael".into(), "the".into(), "whale".into()]),
            ..Guidance::default()
        },
        200,
        rules(),
    );
    // A sentence may start with any capital; `I` is never a name.
    assert!(allows(&mut g, &w, "Call"));
    feed(&mut g, &w, &["I", " said"]);
    // Inside a sentence: known names only, and no numerals.
    assert!(allows(&mut g, &w, " Ishmael"));
    assert!(allows(&mut g, &w, " The"), "`the` is a known word");
    assert!(!allows(&mut g, &w, "5"));
    assert!(!allows(&mut g, &w, "("), "no asides");
    feed(&mut g, &w, &[" "]);
    assert!(!allows(&mut g, &w, "Call"), "`call` is in no source");
    assert!(allows(&mut g, &w, "I"));
    // A capitalised word may only go on towards a known one.
    feed(&mut g, &w, &["W"]);
    assert!(allows(&mut g, &w, "h"));
    assert!(!allows(&mut g, &w, "x"));
    assert!(!allows(&mut g, &w, "."), "`W` is not a word yet");
    // After a sentence ends, a capital is free again.
    let (mut g, w) = guide_with(
        Guidance {
            known_words: Some(Vec::new()),
            ..Guidance::default()
        },
        200,
        rules(),
    );
    feed(&mut g, &w, &["I", " said", "."]);
    assert!(allows(&mut g, &w, " The"));
    // Without the rule, anything goes.
    let (mut g, w) = guide(&[WHALE], 200);
    feed(&mut g, &w, &["I", " said"]);
    assert!(allows(&mut g, &w, " Ishmael"));
    assert!(allows(&mut g, &w, "5"));
}

/// The logit `token` gets from the guide at this step, from 0.
fn logit_of(g: &mut QuoteGuide, w: &[String], token: &str) -> f32 {
    let mut logits = vec![0.0f32; g.vocab.len()];
    g.constrain(&mut logits);
    logits[id(w, token) as usize]
}

#[test]
fn free_text_leans_towards_a_steer_word_until_it_writes_one() {
    let (mut g, w) = guide_with(
        Guidance {
            passages: vec![WHALE.into()],
            steer_words: vec!["sea".into()],
            ..Guidance::default()
        },
        200,
        rules(),
    );
    feed(&mut g, &w, &["I", " said"]);
    assert_eq!(logit_of(&mut g, &w, " sea"), STEER_BIAS);
    assert_eq!(logit_of(&mut g, &w, " whale"), 0.0);
    feed(&mut g, &w, &[" sea"]);
    assert_eq!(
        logit_of(&mut g, &w, " sea"),
        0.0,
        "written once: no more lean"
    );
}

#[test]
fn free_text_leans_towards_a_carry_word_beside_the_topic_until_it_writes_one() {
    let (mut g, w) = guide_with(
        Guidance {
            passages: vec![WHALE.into()],
            steer_words: vec!["sea".into()],
            carry_words: vec!["whale".into()],
            ..Guidance::default()
        },
        200,
        rules(),
    );
    feed(&mut g, &w, &["I", " said"]);
    assert_eq!(logit_of(&mut g, &w, " whale"), CARRY_BIAS);
    feed(&mut g, &w, &[" sea"]);
    assert_eq!(
        logit_of(&mut g, &w, " whale"),
        CARRY_BIAS,
        "the topic's word ends only its own lean"
    );
    feed(&mut g, &w, &[" and", " whale"]);
    assert_eq!(
        logit_of(&mut g, &w, " whale"),
        0.0,
        "written once: no more lean"
    );
}

#[test]
fn free_text_cannot_complete_a_run_of_four_words_of_its_prompt() {
    let (mut g, w) = copy_guide("Your move: answer the point directly.", &[]);
    feed(&mut g, &w, &["I", " answer", " the", " point"]);
    assert!(!allows(&mut g, &w, " directly"), "the run's fourth word");
    assert!(allows(&mut g, &w, " now"));
    assert!(allows(&mut g, &w, "."));
    // Case and punctuation do not matter (norm()): `your move: answer`
    // may not go on with `the`, in either case.
    let (mut g, w) = copy_guide("Your move: answer the point directly.", &[]);
    feed(&mut g, &w, &["your", " move", ",", " answer"]);
    assert!(!allows(&mut g, &w, " the"));
    assert!(!allows(&mut g, &w, " The"));
    assert!(allows(&mut g, &w, " now"));
    // A word written in pieces is caught at its last piece: `th` may
    // become `tha`, not `the`.
    let (mut g, w) = copy_guide("Your move: answer the point directly.", &[]);
    feed(&mut g, &w, &["your", " move", ",", " answer", " "]);
    feed_chars(&mut g, &w, "th");
    assert!(!allows(&mut g, &w, "e"));
    assert!(allows(&mut g, &w, "a"));
    // The passages count too, and a quote is the way to use their words.
    let (mut g, w) = copy_guide("nothing", &[]);
    feed(&mut g, &w, &["I", " we", " whale", " rose"]);
    feed(&mut g, &w, &[" at"]);
    assert!(!allows(&mut g, &w, " dawn"), "`whale rose at dawn`");
    assert!(allows(&mut g, &w, " \""));
}

#[test]
fn titles_may_always_be_named_and_runs_restart_after_a_quote() {
    let title = "The Whale Rose at Dawn";
    let (mut g, w) = copy_guide("nothing", &[title]);
    feed(
        &mut g,
        &w,
        &["I", " said", " the", " whale", " rose", " at"],
    );
    assert!(allows(&mut g, &w, " dawn"));
    // Words before a quote and after it are not one run.
    let (mut g, w) = copy_guide("we said the whale and the sea was calm", &[]);
    feed(
        &mut g,
        &w,
        &["I", " said", " the", " \"The", " whale", " rose", " at"],
    );
    feed(
        &mut g,
        &w,
        &[" dawn", "\"", " [s1]", " and", " the", " sea"],
    );
    assert!(!allows(&mut g, &w, " was"), "`and the sea was`");
    let (mut g, w) = copy_guide("said the whale rose", &[]);
    feed(&mut g, &w, &["I", " said", " the"]);
    feed(&mut g, &w, &[" \"The", " whale", " rose", " at", " dawn"]);
    feed(&mut g, &w, &["\"", " [s1]"]);
    assert!(
        allows(&mut g, &w, " rose"),
        "`said the` came before the quote"
    );
}

#[test]
fn the_copy_rule_words_match_the_stats_definition() {
    // What the guide lets through scores no copied words.
    let avoid = "Your move: answer the point directly.";
    let (mut g, w) = copy_guide(avoid, &[]);
    feed(&mut g, &w, &["I", " answer", " the", " point", " now", "."]);
    let runs = RunIndex::new(&[WHALE, avoid], &[], words::COPY_RUN_WORDS);
    assert_eq!(words::copied_words_outside_quotes(&g.text(), &runs), 0);
    assert_eq!(
        words::copied_words_outside_quotes("I answer the point directly.", &runs),
        4
    );
}

#[test]
fn a_quote_never_runs_across_a_paragraph_break() {
    let (mut g, w) = guide(
        &["The whale rose at dawn.\n\nThe sea rose at dawn too."],
        100,
    );
    feed(
        &mut g,
        &w,
        &["I", " \"The", " whale", " rose", " at", " dawn", "."],
    );
    assert!(!allows(&mut g, &w, " The"), "the next paragraph");
    assert!(allows(&mut g, &w, "\""));
    // The next paragraph's start is a clause start of its own.
    let (mut g, w) = guide(
        &["The whale rose at dawn,\n\nthe sea rose at dawn too."],
        100,
    );
    feed(&mut g, &w, &["I", " \""]);
    assert!(allows(&mut g, &w, "t"));
}

#[test]
fn free_text_writes_no_word_in_capitals() {
    let english = GuideRules {
        english_words: true,
        ..rules()
    };
    let (mut g, w) = whale_guide(english.clone());
    feed(&mut g, &w, &["I", " said"]);
    assert!(!allows(&mut g, &w, " ZAN"), "a word in capitals");
    let (mut g, w) = whale_guide(english);
    feed(&mut g, &w, &["I", " said", " ", "Z"]);
    assert!(!allows(&mut g, &w, "A"), "`ZA…` goes on in capitals");
    assert!(!allows(&mut g, &w, "IES"));
    // With the English-words rule off, capitals are the model's own.
    let (mut g, w) = whale_guide(rules());
    feed(&mut g, &w, &["I", " said"]);
    assert!(allows(&mut g, &w, " ZAN"));
}

#[test]
fn a_text_with_no_clause_start_in_reach_is_quoted_from_its_words() {
    // 30 words and no mark: the text's start is 30 words from its end, so
    // no clause start has an end in reach; word starts within 25 do.
    let mut words: Vec<String> = ('a'..='z').map(|c| format!("{c}{c}")).collect();
    words.extend(["zz"; 4].map(String::from));
    let (mut g, w) = guide(&[words.join(" ").as_str()], 200);
    feed(&mut g, &w, &["I", " \""]);
    assert!(!allows(&mut g, &w, "a"), "30 words to the end");
    assert!(allows(&mut g, &w, "j"), "21 words to the end");
}

/// The English-words rule as first written: every word-leading token read
/// against the word lists on every step. The rule's grouped and cached
/// form must ban exactly what this bans.
fn non_words_by_reading_every_lead(vocab: &Vocabulary, known: &[String], word: &str) -> Vec<u32> {
    let is_word = |w: &str| words::is_english_word(w) || words::listed_word(known, w);
    let is_start = |p: &str| words::is_english_prefix(p) || words::listed_prefix(known, p);
    let word = word.to_lowercase();
    let word_done = word.is_empty() || is_word(&word);
    let mut banned = Vec::new();
    for (lead, &english) in vocab.word_leads.iter().zip(vocab.english_leads()) {
        let ok = if !word.is_empty() && !lead.after_gap {
            let full = format!("{word}{}", lead.word);
            if lead.ends_word {
                is_word(&full)
            } else {
                is_start(&full)
            }
        } else {
            word_done
                && (english
                    || if lead.ends_word {
                        words::listed_word(known, &lead.word)
                    } else {
                        words::listed_prefix(known, &lead.word)
                    })
        };
        if !ok {
            banned.push(lead.id);
        }
    }
    if !word_done {
        banned.extend_from_slice(&vocab.wordless);
        banned.extend_from_slice(&vocab.stops);
    }
    banned.sort();
    banned.dedup();
    banned
}

#[test]
fn the_english_words_rule_bans_what_reading_every_lead_bans() {
    let known: Vec<String> = vec!["ishmael".into(), "qzx".into()];
    let guidance = Guidance {
        passages: vec!["Call me Ishmael, said the qzx.".to_string()],
        known_words: Some(known.clone()),
        ..Guidance::default()
    };
    let rules = GuideRules {
        english_words: true,
        ..rules()
    };
    let (mut g, _) = guide_with(guidance, 200, rules);
    let vocab = Arc::clone(&g.vocab);
    for word in [
        "", "i", "wha", "whale", "whale'", "qz", "qzx", "ishm", "ishmael", "the", "th", "z",
        "rose", "dawni", "wh", "whales", "q", "ishmae", "unbelie", "xq", "a", "an", "s",
    ] {
        // Twice each: the second step reads the cached bans.
        for _ in 0..2 {
            g.next_epoch();
            let mut logits = vec![0.0f32; vocab.len()];
            g.forbid_non_words(&mut logits, word);
            let banned: Vec<u32> = (0..logits.len() as u32)
                .filter(|&id| logits[id as usize] == f32::NEG_INFINITY)
                .collect();
            assert_eq!(
                banned,
                non_words_by_reading_every_lead(&vocab, &known, word),
                "{word:?}"
            );
        }
    }
}

#[test]
fn passages_may_carry_their_own_tags() {
    // An ask's evidence is tagged by its pointer: the tag forced after a
    // quote of it is ` [E4]`, not ` [s1]`.
    let (mut g, w) = guide_with(
        Guidance {
            passages: vec![WHALE.to_string()],
            passage_tags: vec!["E4".to_string()],
            ..Guidance::default()
        },
        100,
        rules(),
    );
    feed(
        &mut g,
        &w,
        &["I", " \"The", " whale", " rose", " at", " dawn", "\"", " ["],
    );
    assert!(!allows(&mut g, &w, "s"));
    feed_chars(&mut g, &w, "E4]");
    assert_eq!(g.text(), "I \"The whale rose at dawn\" [E4]");
}

#[test]
fn a_claim_line_ends_at_its_quotes_tag() {
    let (mut g, w) = guide_with(
        Guidance {
            passages: vec![WHALE.to_string()],
            passage_tags: vec!["E2".to_string()],
            claim_line: true,
            ..Guidance::default()
        },
        100,
        rules(),
    );
    feed(
        &mut g,
        &w,
        &["I", " \"The", " whale", " rose", " at", " dawn", "\""],
    );
    let mut control = GuideControl::Continue;
    for c in " [E2].".chars() {
        assert!(
            !allows(&mut g, &w, ";") || c == ';',
            "only a full stop after the tag"
        );
        control = feed(&mut g, &w, &[c.to_string().as_str()]);
    }
    assert_eq!(g.text(), "I \"The whale rose at dawn\" [E2].");
    assert_eq!(control, GuideControl::Stop);
}

#[test]
fn a_title_stop_ends_no_sentence() {
    let (mut g, w) = guide(&[WHALE], 100);
    feed_chars(&mut g, &w, "Mr. Ahab");
    assert!(!g.at_sentence_end());
    feed_chars(&mut g, &w, " said so.");
    assert!(g.at_sentence_end());
}
