//! The word lists `reading-v1` to `reading-v5` read with: meta talk
//! (words and phrases about the text rather than its matter). Stop words
//! live in [`crate::content`].

/// Own words that make a turn talk about the moot instead of its topic.
pub const META_TALK_WORDS: &[&str] = &[
    "text",
    "texts",
    "passage",
    "passages",
    "page",
    "pages",
    "paragraph",
    "paragraphs",
    "excerpt",
    "excerpts",
    "chapter",
    "chapters",
    "story",
    "stories",
    "edit",
    "edits",
    "edited",
    "editing",
    "rewrite",
    "rewrote",
    "rewritten",
    "revision",
    "revisions",
    "response",
    "responses",
    "respond",
    "responded",
    "turns",
    "rule",
    "rules",
    "instruction",
    "instructions",
    "prompt",
    "quote",
    "quotes",
    "quoted",
    "quotation",
    "quotations",
    "citation",
    "citations",
    "cite",
    "cited",
    "tag",
    "tags",
    "statement",
    "statements",
    "phrase",
    "phrases",
    "phrasing",
    "sentence",
    "sentences",
    "wording",
    "cliche",
    "cliches",
    "clich\u{e9}",
    "clich\u{e9}s",
    "theme",
    "themes",
    "refers",
];

/// Phrases (of `norm()` words) that do the same where their words alone
/// need not (`turn` is also a verb; `changes` a topic).
pub const META_TALK_PHRASES: &[&str] = &[
    "your turn",
    "my turn",
    "next turn",
    "this turn",
    "the original",
    "the following",
    "the changes",
    "following changes",
    "i made",
    "as an ai",
    "language model",
    "the book says",
    "in the book",
    "this book",
    "the author",
    "the word",
    "this line",
    "the line",
    "these lines",
];

/// Words added in `reading-v2`: a turn that thanks, explains, gives
/// examples or passes on information talks about the exchange, not the
/// topic (the demo's turn 1 under v1: "I am glad you enjoyed the
/// information about people living for"); so does one that reads its quote
/// as literature ("is a classic metaphor", "a descriptive and imaginative
/// way of writing the scene", "a clever way of saying").
pub const META_TALK_WORDS_V2: &[&str] = &[
    "information",
    "example",
    "examples",
    "explanation",
    "explanations",
    "explain",
    "explains",
    "explained",
    "summary",
    "summarize",
    "summarise",
    "improvement",
    "improvements",
    "grammar",
    "enjoyed",
    "author",
    "authors",
    "reader",
    "readers",
    "title",
    "titles",
    "quoting",
    "topic",
    "topics",
    "conversation",
    "discussion",
    "dialogue",
    "debate",
    "metaphor",
    "metaphors",
    "tale",
    "tales",
    "scene",
    "scenes",
    "version",
    "versions",
    "descriptive",
    "describes",
    "description",
    "interpret",
    "interpreted",
    "interpretation",
    "meaning",
    "meanings",
    "literary",
    "narrative",
    "narrator",
    "novel",
    "novels",
    "character",
    "characters",
    "plot",
    "imagery",
    "symbol",
    "symbolizes",
    "expression",
    "expressions",
    "writing",
    "written",
    "document",
    "documents",
];

/// Phrases added in `reading-v2`.
pub const META_TALK_PHRASES_V2: &[&str] = &[
    "glad you",
    "thank you",
    "thanks for",
    "you enjoyed",
    "you provided",
    "i provided",
    "you mentioned",
    "you asked",
    "your question",
    "my book",
    "your book",
    "the books",
    "the words",
    "these words",
    "those words",
    "my words",
    "your words",
    "way of saying",
    "way to say",
    "way of writing",
    "well known",
    "glad to help",
    "happy to help",
    "talk about",
    "great point",
    "interesting point",
    "as noted",
    "the book",
    "famous lines",
    "previous answer",
    "add a bit more",
    "way of weaving",
];

/// Words added in `reading-v3`: a turn that reviews its book or its
/// lines as writing ("a classic work of literature that has captivated
/// audiences with its imaginative storytelling", "a delightful short poem",
/// "The original is: …", "in lines you know") talks about texts, not the
/// topic.
pub const META_TALK_WORDS_V3: &[&str] = &[
    "line",
    "lines",
    "poem",
    "poems",
    "poetry",
    "poet",
    "verse",
    "verses",
    "literature",
    "storytelling",
    "storyteller",
    "original",
    "classic",
    "classics",
    "audience",
    "audiences",
    "series",
    "edition",
    "editions",
    "book",
    "books",
    "dictionary",
    "definition",
    "definitions",
    "entry",
    "entries",
    "word",
    "words",
    "idiom",
    "idioms",
    "idiomatic",
    "typo",
    "typos",
    "spelling",
    "misspelled",
    "misspelling",
];

/// Phrases added in `reading-v3`: the prompt's name for the other book,
/// echoed ("your friend and your friend are going to spend a week").
pub const META_TALK_PHRASES_V3: &[&str] = &["your friend"];

/// Words added in `reading-v4`: a turn that talks about the question it was
/// asked instead of answering it ("The question raises the question
/// about…", "is a very deep question", "I think it's a great question"),
/// that reads its quote as a saying ("that's a very old saying") or as
/// expression ("a famous and beautiful way of expressing the need"), that
/// remarks on the other's turn ("That's a wonderful observation", "What a
/// wonderful and insightful comment", "Here's a revised and polished
/// answer to your query", "I appreciate your suggestions", "Based on the
/// given context", "the two main approaches you mentioned", "Your opening
/// has the right tone"), that reads its quote as writing ("the
/// introduction", "a humorous reference", "an excellent piece of
/// journalism", "a clear and concise way to convey the message", "too
/// casual for the tone of a post", "and the rest of the piece", "not a
/// completely accurate and honest portrayal", "an old and clumsy way of
/// stating it"), or that
/// points the reader to the book's apparatus ("; see the bibliography").
pub const META_TALK_WORDS_V4: &[&str] = &[
    "question",
    "questions",
    "saying",
    "sayings",
    "proverb",
    "proverbs",
    "bibliography",
    "observation",
    "observations",
    "comment",
    "comments",
    "query",
    "queries",
    "answer",
    "answers",
    "revised",
    "suggestion",
    "suggestions",
    "context",
    "introduction",
    "reference",
    "references",
    "article",
    "articles",
    "journalism",
    "post",
    "posts",
    "message",
    "messages",
    "convey",
    "conveys",
    "concise",
    "tone",
    "refinement",
    "mention",
    "mentions",
    "mentioned",
    "portrayal",
    "stating",
    "expressing",
    "footnote",
    "footnotes",
    "glossary",
];

/// Phrases added in `reading-v4`: quotes read as phrasing, and edits
/// reported ("…" [s5]; I removed it.").
pub const META_TALK_PHRASES_V4: &[&str] = &[
    "way of putting",
    "putting it",
    "i removed",
    "i added",
    "i changed",
    "i replaced",
    "i corrected",
    "i deleted",
    "i did add",
    "your opening",
    "the piece",
    "this piece",
];

/// Words added in `reading-v5`: a turn that parses its quote as grammar
/// (the embedded model on Moby-Dick and Pride and Prejudice, 2026-12-07:
/// "The verb "the acknowledged favourite of my father" [s4]; the verb was
/// placed after the noun.").
pub const META_TALK_WORDS_V5: &[&str] = &[
    "verb",
    "verbs",
    "noun",
    "nouns",
    "adjective",
    "adjectives",
    "adverb",
    "adverbs",
    "pronoun",
    "pronouns",
    "preposition",
    "prepositions",
    "prepositional",
    "syntax",
    "grammatical",
];

/// Topic words too general to show a turn is about the topic (since
/// `reading-v4`): nearly every turn of a moot about people names people.
pub const GENERIC_TOPIC_WORDS: &[&str] = &[
    "people", "person", "persons", "man", "men", "woman", "women", "human", "humans", "thing",
    "things",
];
