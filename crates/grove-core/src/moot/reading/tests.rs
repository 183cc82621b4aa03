//! Tests of `reading`.

use super::*;

fn sources<'a>(
    passages: &'a [&'a str],
    earlier: &'a [&'a str],
    titles: &'a [&'a str],
    topic: Option<&'a str>,
    last_other: Option<&'a str>,
) -> ReadingSources<'a> {
    ReadingSources {
        passages,
        earlier,
        titles,
        topic,
        last_other,
        version: ReadingVersion::CURRENT,
    }
}

const TITLES: [&str; 2] = ["Moby Dick; or The Whale", "Pride and Prejudice"];

#[test]
fn meta_talk_is_talk_about_the_moot() {
    let s = sources(&[], &[], &TITLES, Some("what people live for"), None);
    let edit = "I made the following changes to the original \"call me Ishmael now\" [s1].";
    assert!(read_turn(edit, &s).meta_talk);
    assert!(read_turn("Your turn, friend: \"call me Ishmael now\" [s1].", &s).meta_talk);
    assert!(read_turn("This passage shows little.", &s).meta_talk);
    // Words inside quotes, titles and the topic are not meta talk.
    let plain = "Men live for the sea, Pride and Prejudice: \"the story of my life\" [s1].";
    assert!(!read_turn(plain, &s).meta_talk);
    let titled = sources(&[], &[], &["The Story of My Heart"], None, None);
    assert!(!read_turn("The Story of My Heart holds that love endures.", &titled).meta_talk);
    // `turn` alone is a verb.
    assert!(!read_turn("We turn to the sea for bread.", &s).meta_talk);
}

#[test]
fn reading_v2_also_counts_talk_about_the_exchange() {
    let mut s = sources(&[], &[], &TITLES, Some("what people live for"), None);
    let glad = "I am glad you enjoyed the information about people living for.";
    assert!(read_turn(glad, &s).meta_talk);
    // Seen in 135M moots under the issue-26 guide: assistant talk, and a
    // quote read as literature or as a document.
    for seen in [
        "It's a great thing to talk about, and it's something that I'm glad to help with.",
        "The Jargon File, as noted in the document, has pointed out that people live.",
        "The Queen, tossing her head, is a descriptive way of writing the scene.",
        "The crew is a clever way of saying that people matter.",
        "The sea, which contains the famous lines from the book, is a very interesting point.",
        // The README's demo on the fallback books, 2026-12-02.
        "I'd like to add a bit more to the previous answer.",
        "The Devil's Dictionary has a delightful way of weaving together different ideas and meanings in a mix of humorous and clever language.",
    ] {
        assert!(read_turn(seen, &s).meta_talk, "{seen}");
    }
    s.version = ReadingVersion::V1;
    assert!(!read_turn(glad, &s).meta_talk, "v1 reads as it did");
    assert_eq!(
        ReadingVersion::parse("reading-v1"),
        Some(ReadingVersion::V1)
    );
    assert_eq!(
        ReadingVersion::parse(READING_VERSION),
        Some(ReadingVersion::CURRENT)
    );
    assert_eq!(ReadingVersion::parse("reading-v9"), None);
}

#[test]
fn reading_v4_also_counts_talk_about_the_question_and_sayings() {
    let mut s = sources(
        &[],
        &[],
        &TITLES,
        Some("how people should spend their time"),
        None,
    );
    // Seen in 135M moots of 2026-12-04 (reading-v3 read them as clean).
    let seen = [
        "The question raises the question about how people should spend their days.",
        "How they should spend their life is a very deep question.",
        "That's a very important and old saying.",
        "That's a wonderful observation, and I completely agree.",
        "I completely disagree with your last comment.",
        "Here's a revised and polished answer to your query.",
        "It is a famous and beautiful way of putting it.",
        "I appreciate your suggestions.",
        "Based on the given context, I believe that people should use their time wisely.",
        "The reports continued in front; I removed it.",
        "In an excellent piece of journalism, the King turned pale.",
        "There are two main approaches, as mentioned.",
        "Your opening has the right tone.",
        "It's a clear and concise way to convey the message that people live for things.",
        "A man went out, and the rest of the piece.",
        "It is not a completely accurate and honest portrayal of how people should spend time.",
        "This is an old and clumsy way of stating it, but it is true.",
        "While that's not entirely accurate, I did add a crucial detail.",
        "It is a famous and beautiful way of expressing the need for kindness.",
        "A bore is one who talks when you wish him to listen; see the bibliography.",
    ];
    for text in seen {
        assert!(read_turn(text, &s).meta_talk, "{text}");
    }
    s.version = ReadingVersion::V3;
    for text in seen {
        assert!(!read_turn(text, &s).meta_talk, "v3 reads as it did: {text}");
    }
    assert_eq!(
        ReadingVersion::parse("reading-v3"),
        Some(ReadingVersion::V3)
    );
}

#[test]
fn reading_v4_needs_more_than_people_to_be_on_topic() {
    let topic = Some("how people should spend their time");
    let mut s = sources(&[], &[], &TITLES, topic, None);
    assert!(!read_turn("The people's mind is a cruel mistress.", &s).on_topic);
    assert!(!read_turn("People waste their days.", &s).on_topic);
    assert!(read_turn("People should spend more time at home.", &s).on_topic);
    s.version = ReadingVersion::V3;
    assert!(read_turn("The people's mind is a cruel mistress.", &s).on_topic);
}

#[test]
fn draft_shape_score_sees_a_word_doubled_at_a_hyphen() {
    let doubled = "People must learn to tell the safe from the safe-safest. \"a b c d\" [s1]";
    let plain = "People must learn to tell the safe from the reckless. \"a b c d\" [s1]";
    let compound = "People must learn to tell well-being from the reckless. \"a b c d\" [s1]";
    let p = draft_shape_score(plain, None, &[], None);
    // Word pairs an earlier turn said count against a draft.
    let earlier = ["People must learn to tell what is safe."];
    assert!(draft_shape_score(plain, None, &earlier, None) < p);
    assert!(draft_shape_score(doubled, None, &[], None) < p);
    assert_eq!(draft_shape_score(compound, None, &[], None), p);
}

#[test]
fn draft_shape_score_sees_loops_bare_quotes_and_chained_quotes() {
    let good = "People live for pride, and pride alone: \"a single man in want of a wife,\" [s1] so a wife is what he lives for.";
    let looped =
        "The sea, the sea, the sea is all: \"a single man in want of a wife,\" [s1] the sea.";
    let chained = "People live for a wife and a home: \"a single man in want of a wife,\" [s1] \"it is a truth universally acknowledged,\" [s2] so they say.";
    let bare = "\"a single man in want of a wife,\" [s1]";
    let g = draft_shape_score(good, None, &[], None);
    assert!(g > draft_shape_score(looped, None, &[], None));
    assert!(g > draft_shape_score(chained, None, &[], None));
    assert!(g > draft_shape_score(bare, None, &[], None));
    let doubled = "I think people should spend it wisely and wisely, \"a b c d\" [s1].";
    let once = "I think people should spend it wisely and well, \"a b c d\" [s1].";
    assert!(draft_shape_score(doubled, None, &[], None) < draft_shape_score(once, None, &[], None));
    // Words earlier turns said already count against a draft, the
    // topic's aside.
    let earlier = [good];
    assert!(draft_shape_score(good, None, &earlier, None) < g);
    // A phrase of an earlier turn said again, and a phrase bent around a
    // word it could not write, count against a draft; topic words too.
    let topic = Some("what people live for");
    let before = ["People living for life is common. \"a b c d\" [s1]"];
    let fresh = "Most of us want a home and a friend. \"a b c d\" [s1]";
    let echo = "People living for money want a bigger house. \"a b c d\" [s1]";
    let bent = "No, people living for live want a home. \"a b c d\" [s1]";
    let f = draft_shape_score(fresh, None, &before, topic);
    assert!(draft_shape_score(echo, None, &before, topic) < f);
    assert!(draft_shape_score(bent, None, &[], topic) < draft_shape_score(echo, None, &[], topic));
    // A quote that bears on the claim or the topic counts for a draft.
    let apt = "Most of us want a home and a friend. \"a friend who will live by us\" [s1]";
    let off = "Most of us want a home and a friend. \"a fried machine is damaged\" [s1]";
    assert!(draft_shape_score(apt, None, &[], topic) > draft_shape_score(off, None, &[], topic));
    let last = "Money rules: \"the pride of a wife\" [s2].";
    assert!(draft_shape_score(good, Some(last), &[], None) > g);
}

#[test]
fn unsupported_terms_are_invented_numbers_and_names() {
    let passage = "Captain Ahab paced the deck in 1851, and the Pequod sailed on.";
    let passages = [passage];
    let s = sources(&passages, &["Elizabeth laughed."], &TITLES, None, None);
    let text = "In the 18th century there were 24,000 pages, and Ahab met Bob, \
                \"the Pequod sailed on, in 1999\" [s1]. Then Elizabeth left; I know Pride and Prejudice. \
                Captain Nemo said 1851.";
    let r = read_turn(text, &s);
    // Inside quotes nothing counts; sentence starts (`In`, `Then`,
    // `Captain`) are not names; `I` never is.
    assert_eq!(r.unsupported_terms, ["18th", "24", "000", "Bob", "Nemo"]);
    // Since reading-v3, words no English list holds and no source has.
    let garbled = "It was the first ve rnse of the spy-planes, as Ahab knew.";
    assert_eq!(read_turn(garbled, &s).unsupported_terms, ["ve", "rnse"]);
    let v2 = ReadingSources {
        version: ReadingVersion::V2,
        ..s
    };
    assert!(read_turn(garbled, &v2).unsupported_terms.is_empty());
    assert!(
        read_turn("Ahab sails, says Moby Dick.", &s)
            .unsupported_terms
            .is_empty()
    );
}

#[test]
fn answering_shares_a_content_word_with_the_last_quotes_or_topic() {
    let last = "Money matters: \"a single man in possession of a good fortune\" [s1].";
    let topic = Some("what people live for");
    let s = sources(&[], &[], &TITLES, topic, Some(last));
    let r = read_turn(
        "A fortune cannot buy the sea \"call me Ishmael now\" [s2].",
        &s,
    );
    assert_eq!(r.answers_other, Some(true));
    assert!(!r.on_topic);
    let r = read_turn("The sea calls and we are living for it.", &s);
    assert_eq!(r.answers_other, Some(true), "the topic's `live` (stemmed)");
    assert!(r.on_topic);
    // Its own words outside quotes do not count, nor do stop words.
    let r = read_turn("Money is what they have \"a good fortune\" [s1].", &s);
    assert_eq!(r.answers_other, Some(false));
    let first = sources(&[], &[], &TITLES, topic, None);
    assert_eq!(
        read_turn("People live for bread.", &first).answers_other,
        None
    );
}

#[test]
fn on_topic_needs_a_topic_word_outside_quotes() {
    let s = sources(&[], &[], &TITLES, Some("the law of the city"), None);
    assert!(read_turn("A city needs its laws.", &s).on_topic);
    assert!(!read_turn("Whales swim \"in the law of the city\" [s1].", &s).on_topic);
    let none = sources(&[], &[], &TITLES, None, None);
    assert!(!read_turn("A city needs its laws.", &none).on_topic);
}

#[test]
fn draft_score_prefers_a_grounded_answer_on_topic() {
    let good = TurnReading {
        answers_other: Some(true),
        on_topic: true,
        distinct_2: Some(1.0),
        ..TurnReading::default()
    };
    let meta = TurnReading {
        meta_talk: true,
        ..good.clone()
    };
    let invented = TurnReading {
        unsupported_terms: vec!["24".into()],
        ..good.clone()
    };
    let off_topic = TurnReading {
        answers_other: Some(false),
        on_topic: false,
        ..good.clone()
    };
    let score = |r: &TurnReading| draft_score(r, true, true);
    assert!(score(&good) > score(&off_topic));
    assert!(score(&off_topic) > score(&meta));
    assert!(score(&off_topic) > score(&invented));
    assert!(draft_score(&good, true, true) > draft_score(&good, false, true));
    assert_eq!(draft_score(&good, true, false), f64::NEG_INFINITY);
}

#[test]
fn topic_word_forms_share_the_topic_stems() {
    let forms = topic_word_forms("what people live for");
    for f in ["people", "live", "lives", "living", "lived"] {
        assert!(forms.contains(&f.to_string()), "{f} in {forms:?}");
    }
    assert!(!forms.iter().any(|f| f == "what" || f == "for"));
    let topic = content_stems("what people live for");
    assert!(forms.iter().all(|f| topic.contains(&stem(f))));
}

#[test]
fn distinct_2_falls_with_loops_and_counting() {
    let s = sources(&[], &[], &TITLES, None, None);
    let fresh = read_turn("The sea gives men a reason to rise each day.", &s);
    assert_eq!(fresh.distinct_2, Some(1.0));
    let looped = read_turn("turning around and turning around and turning around", &s);
    // 7 pairs, 3 distinct.
    assert_eq!(looped.distinct_2, Some(0.429));
    assert_eq!(read_turn("Yes.", &s).distinct_2, None);
    // Pairs never span a quote; a moot's figure pools every turn.
    assert_eq!(
        moot_distinct_2(["a b \"x y z w\" [s1] a b", "a b c"]),
        Some(0.5)
    );
}

/// `reading-v5`: a quote carries the claim when the own words share a
/// content word with it beyond the topic's; quote relevance counts the
/// topic's and the other's last quotes' words a quote holds, beside the
/// mean of the passages' clauses. Earlier versions leave all three absent.
#[test]
fn reading_v5_reads_whether_quotes_carry_the_claim() {
    let topic = Some("whether a person should obey the law of the city");
    let passage = "The law of the city keeps its walls, and walls keep men safe. \
                   The river runs past the mill all day, slow and brown.";
    let passages = [passage];
    let last = "You say \"men keep walls for the sake of peace\" [s2].";
    let s = sources(&passages, &[], &TITLES, topic, Some(last));
    let carried = "Walls keep men, \"the law of the city keeps its walls\" [s1].";
    let r = read_turn(carried, &s);
    assert_eq!(r.quote_carries_claim, Some(true), "{r:?}");
    // The quote holds law, city (the topic's) and keep, wall (the other's
    // quote's): 4; the passage's clauses of 4 words or more hold 4 (the
    // quoted one), 3 (wall, keep, men) and 0 (the river's).
    assert_eq!(r.quote_relevance, Some(4.0));
    assert_eq!(r.clause_relevance, Some(2.333), "{r:?}");
    // Own words that meet the quote only in the topic's words.
    let topic_only = "The law binds us all, \"the law of the city keeps its walls\" [s1].";
    assert_eq!(read_turn(topic_only, &s).quote_carries_claim, Some(false));
    // Own words about something else entirely.
    let apart = "Rivers never stop, \"the law of the city keeps its walls\" [s1].";
    assert_eq!(read_turn(apart, &s).quote_carries_claim, Some(false));
    // No quote: nothing to carry.
    let bare = read_turn("Walls keep men safe.", &s);
    assert_eq!(
        (bare.quote_carries_claim, bare.quote_relevance),
        (None, None)
    );
    let mut v4 = s;
    v4.version = ReadingVersion::V4;
    let old = read_turn(carried, &v4);
    assert_eq!(
        (
            old.quote_carries_claim,
            old.quote_relevance,
            old.clause_relevance
        ),
        (None, None, None)
    );
}
