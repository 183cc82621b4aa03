//! The FTS5 extension points grove's collection-wide ranking needs, over
//! SQLite's C API: the `grove_rank` ranking function (FTS5's own `bm25()`,
//! fed the collection's statistics instead of its table's); the index's
//! tokenizer, to find the indexed terms of a query's words; and a
//! pass-through in front of that tokenizer, so an ingest reads each chunk's
//! terms as FTS5 indexes them instead of tokenizing the chunk a second time.
//!
//! The pass-through is registered under the tokenizer's own name
//! (`porter`) on every connection to a shard, before anything reads its
//! schema: the shard's index keeps the stock tokenizer spec, so any SQLite
//! still opens and searches it, and grove's connections index the same
//! terms while counting them ([`IndexedTerms`]).
//!
//! `grove_rank(fts_table, weights, books, lengths, k)` keeps the best `k` rows of its
//! query as FTS5 hands them over: a row's score (higher is better) when it
//! enters the best `k` so far, NULL when it cannot, so `WHERE ... IS NOT
//! NULL` keeps only a few rows, a superset of the top `k`. `weights`, `books`
//! and `lengths` are [`rank::Scorer`]'s encoding of the collection's weights
//! and of the searched books' chunks: each chunk's length in tokens (kept at ingest
//! from FTS5's own counts, so no row's length is read from the index) and
//! its place among ties (book key, then chunk index). Scoring itself is
//! [`rank::Scorer`]; this file only reads FTS5's phrase counts.

use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;

use rusqlite::Connection;
use rusqlite::ffi;

use super::rank;

/// The tokenizer every grove index is created with.
pub(crate) const TOKENIZE: &str = "porter unicode61 remove_diacritics 2";
const TOKENIZER_NAME: &CStr = c"porter";
const TOKENIZER_ARGS: [&CStr; 3] = [c"unicode61", c"remove_diacritics", c"2"];

const FUNCTION_NAME: &CStr = c"grove_rank";

/// The FTS5 API of a connection (`SELECT fts5(?1)`, as FTS5 documents).
fn fts5_api(conn: &Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: `db` is this connection's open handle. The statement is
    // prepared, bound to a pointer slot that outlives it, stepped once and
    // finalized here; FTS5 writes the API pointer into `api` during the step.
    unsafe {
        let db = conn.handle();
        let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        );
        if rc != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
        }
        let rc = ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        let step = if rc == ffi::SQLITE_OK {
            ffi::sqlite3_step(stmt)
        } else {
            rc
        };
        ffi::sqlite3_finalize(stmt);
        if step != ffi::SQLITE_ROW || api.is_null() {
            return Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_ERROR),
                Some("FTS5 is not available".into()),
            ));
        }
    }
    Ok(api)
}

/// Registers grove's FTS5 extensions on a connection: `grove_rank` and the
/// counting pass-through in front of the index's tokenizer. Every shard
/// connection runs it once, before its schema is read (`schema::SHARD`).
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let api = fts5_api(conn)?;
    // SAFETY: `api` is the live FTS5 API of this connection; the function
    // has no user data and nothing to destroy.
    let rc = unsafe {
        match (*api).xCreateFunction {
            Some(create) => create(
                api,
                FUNCTION_NAME.as_ptr(),
                ptr::null_mut(),
                Some(grove_rank),
                None,
            ),
            None => ffi::SQLITE_ERROR,
        }
    };
    check(rc)?;
    // SAFETY: as above.
    unsafe { register_counting(api) }
}

fn check(rc: c_int) -> rusqlite::Result<()> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None))
    }
}

fn no_tokenizer() -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        ffi::Error::new(ffi::SQLITE_ERROR),
        Some(format!("FTS5 has no tokenizer `{TOKENIZE}`")),
    )
}

/// The tokenizer module FTS5 finds under the index tokenizer's name: its
/// methods and user data.
///
/// # Safety
/// `api` must be a live FTS5 API.
unsafe fn find_tokenizer(
    api: *mut ffi::fts5_api,
) -> rusqlite::Result<(ffi::fts5_tokenizer, *mut c_void)> {
    // SAFETY: the caller's live API; FTS5 fills both out-parameters.
    unsafe {
        let find = (*api).xFindTokenizer.ok_or_else(no_tokenizer)?;
        let mut user: *mut c_void = ptr::null_mut();
        let mut tokenizer: ffi::fts5_tokenizer = std::mem::zeroed();
        if find(api, TOKENIZER_NAME.as_ptr(), &mut user, &mut tokenizer) != ffi::SQLITE_OK {
            return Err(no_tokenizer());
        }
        Ok((tokenizer, user))
    }
}

/// The counting pass-through registered on one connection: FTS5's own
/// tokenizer module, and while an ingest inserts a chunk, where the chunk's
/// terms go. Owned by FTS5 (freed by `drop_counting` when the connection
/// closes); used only on the connection's thread.
struct Counting {
    porter: ffi::fts5_tokenizer,
    porter_user: *mut c_void,
    /// A `*mut &mut dyn FnMut(&[u8])` while [`IndexedTerms::during`] runs,
    /// null otherwise.
    sink: Cell<*mut c_void>,
    /// Document tokenizations made while the sink was set.
    calls: Cell<u64>,
}

/// One instance FTS5 created of the pass-through: the stock instance it
/// wraps.
struct CountingInstance {
    counting: *const Counting,
    inner: *mut ffi::Fts5Tokenizer,
}

/// Registers the pass-through under the index tokenizer's name, unless the
/// connection has it already.
///
/// # Safety
/// `api` must be a live FTS5 API.
unsafe fn register_counting(api: *mut ffi::fts5_api) -> rusqlite::Result<()> {
    // SAFETY: the caller's live API. The module found stays registered for
    // the connection's life (FTS5 never unregisters), so its methods and
    // user data outlive the pass-through, which FTS5 frees at close too.
    unsafe {
        let (porter, porter_user) = find_tokenizer(api)?;
        if is_counting(&porter) {
            return Ok(());
        }
        let counting = Box::into_raw(Box::new(Counting {
            porter,
            porter_user,
            sink: Cell::new(ptr::null_mut()),
            calls: Cell::new(0),
        }));
        let mut methods = ffi::fts5_tokenizer {
            xCreate: Some(counting_create),
            xDelete: Some(counting_delete),
            xTokenize: Some(counting_tokenize),
        };
        let create = (*api).xCreateTokenizer.ok_or_else(no_tokenizer)?;
        let rc = create(
            api,
            TOKENIZER_NAME.as_ptr(),
            counting.cast::<c_void>(),
            &mut methods,
            Some(drop_counting),
        );
        if rc != ffi::SQLITE_OK {
            drop(Box::from_raw(counting));
        }
        check(rc)
    }
}

/// Whether a tokenizer module is the pass-through. (Were a function's
/// address to differ between codegen units, a miss only costs speed: the
/// ingest then counts a chunk's terms itself, and a second registration
/// wraps the first, which passes everything through.)
fn is_counting(module: &ffi::fts5_tokenizer) -> bool {
    type Create = unsafe extern "C" fn(
        *mut c_void,
        *mut *const c_char,
        c_int,
        *mut *mut ffi::Fts5Tokenizer,
    ) -> c_int;
    module
        .xCreate
        .is_some_and(|create| std::ptr::fn_addr_eq(create, counting_create as Create))
}

unsafe extern "C" fn drop_counting(p: *mut c_void) {
    // SAFETY: `p` is the Box leaked by `register_counting`, freed once by FTS5.
    unsafe { drop(Box::from_raw(p.cast::<Counting>())) }
}

unsafe extern "C" fn counting_create(
    user: *mut c_void,
    args: *mut *const c_char,
    n: c_int,
    out: *mut *mut ffi::Fts5Tokenizer,
) -> c_int {
    // SAFETY: `user` is this module's `Counting`; the stock module creates
    // the wrapped instance from the same arguments.
    unsafe {
        let counting = user.cast::<Counting>();
        let Some(create) = (*counting).porter.xCreate else {
            return ffi::SQLITE_ERROR;
        };
        let mut inner: *mut ffi::Fts5Tokenizer = ptr::null_mut();
        let rc = create((*counting).porter_user, args, n, &mut inner);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let instance = Box::new(CountingInstance { counting, inner });
        *out = Box::into_raw(instance).cast::<ffi::Fts5Tokenizer>();
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn counting_delete(p: *mut ffi::Fts5Tokenizer) {
    // SAFETY: `p` is an instance `counting_create` made; FTS5 deletes it once.
    unsafe {
        let instance = Box::from_raw(p.cast::<CountingInstance>());
        if let Some(delete) = (*instance.counting).porter.xDelete {
            delete(instance.inner);
        }
    }
}

/// FTS5's callback and context, and the ingest's sink, for one document
/// tokenization.
struct Relay {
    sink: *mut c_void,
    ctx: *mut c_void,
    token: TokenCallback,
}

type TokenCallback =
    Option<unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int>;

unsafe extern "C" fn counting_tokenize(
    p: *mut ffi::Fts5Tokenizer,
    ctx: *mut c_void,
    flags: c_int,
    text: *const c_char,
    n: c_int,
    token: TokenCallback,
) -> c_int {
    // SAFETY: `p` is an instance `counting_create` made, whose `Counting`
    // outlives it; the relay lives on this frame for the inner call.
    unsafe {
        let instance = &*p.cast::<CountingInstance>();
        let counting = &*instance.counting;
        let Some(tokenize) = counting.porter.xTokenize else {
            return ffi::SQLITE_ERROR;
        };
        let sink = counting.sink.get();
        if sink.is_null() || flags & ffi::FTS5_TOKENIZE_DOCUMENT == 0 {
            return tokenize(instance.inner, ctx, flags, text, n, token);
        }
        counting.calls.set(counting.calls.get() + 1);
        let mut relay = Relay { sink, ctx, token };
        tokenize(
            instance.inner,
            (&mut relay as *mut Relay).cast::<c_void>(),
            flags,
            text,
            n,
            Some(relay_token),
        )
    }
}

unsafe extern "C" fn relay_token(
    ctx: *mut c_void,
    flags: c_int,
    token: *const c_char,
    n: c_int,
    start: c_int,
    end: c_int,
) -> c_int {
    // SAFETY: `ctx` is the `Relay` of `counting_tokenize`; its sink is the
    // `&mut dyn FnMut` of `IndexedTerms::during`, alive for the insert.
    unsafe {
        let relay = &*ctx.cast::<Relay>();
        let sink = &mut *relay.sink.cast::<&mut dyn FnMut(&[u8])>();
        sink(std::slice::from_raw_parts(
            token.cast::<u8>(),
            n.max(0) as usize,
        ));
        match relay.token {
            Some(forward) => forward(relay.ctx, flags, token, n, start, end),
            None => ffi::SQLITE_OK,
        }
    }
}

/// The terms FTS5 indexes while a statement runs on a connection with the
/// counting pass-through.
pub(crate) struct IndexedTerms<'conn> {
    counting: *const Counting,
    _conn: std::marker::PhantomData<&'conn Connection>,
}

impl<'conn> IndexedTerms<'conn> {
    /// The connection's pass-through; `None` when its index tokenizer is
    /// FTS5's own (a connection not opened as a shard).
    pub(crate) fn of(conn: &'conn Connection) -> rusqlite::Result<Option<IndexedTerms<'conn>>> {
        // SAFETY: the connection's live API; a module whose create method is
        // `counting_create` was registered by `register_counting` with its
        // `Counting`, which lives until the connection closes.
        unsafe {
            let (module, user) = find_tokenizer(fts5_api(conn)?)?;
            Ok(is_counting(&module).then(|| IndexedTerms {
                counting: user.cast::<Counting>(),
                _conn: std::marker::PhantomData,
            }))
        }
    }

    /// Runs `run` (an insert into an index of this connection) with `f`
    /// told each term FTS5 indexes meanwhile, in order; with whether FTS5
    /// tokenized any document through the pass-through.
    pub(crate) fn during<R>(&self, f: &mut dyn FnMut(&[u8]), run: impl FnOnce() -> R) -> (R, bool) {
        /// Clears the sink however `run` ends.
        struct Unset<'a>(&'a Counting);
        impl Drop for Unset<'_> {
            fn drop(&mut self) {
                self.0.sink.set(ptr::null_mut());
            }
        }
        // SAFETY: the `Counting` lives while the connection does, which
        // outlives `self`; it is used on this thread only.
        let counting = unsafe { &*self.counting };
        let mut f = f;
        counting.calls.set(0);
        counting
            .sink
            .set((&mut f as *mut &mut dyn FnMut(&[u8])).cast::<c_void>());
        let unset = Unset(counting);
        let out = run();
        drop(unset);
        (out, counting.calls.get() > 0)
    }
}

/// Reports an error from inside the ranking function.
///
/// # Safety
/// `ctx` must be the function's live context.
unsafe fn fail(ctx: *mut ffi::sqlite3_context, message: &CStr) {
    // SAFETY: the caller's context; SQLite copies the message.
    unsafe { ffi::sqlite3_result_error(ctx, message.as_ptr(), -1) }
}

/// A blob argument's bytes.
///
/// # Safety
/// `value` must be a live argument value; the slice must not outlive it.
unsafe fn blob<'a>(value: *mut ffi::sqlite3_value) -> &'a [u8] {
    // SAFETY: SQLite returns the blob's bytes (or null for an empty one),
    // valid until the value changes, which it does not during the call.
    unsafe {
        let data = ffi::sqlite3_value_blob(value).cast::<u8>();
        let bytes = ffi::sqlite3_value_bytes(value);
        if data.is_null() || bytes <= 0 {
            &[]
        } else {
            std::slice::from_raw_parts(data, bytes as usize)
        }
    }
}

/// What `grove_rank` keeps for one query: its arguments, decoded once, and
/// the best rows so far.
struct Query {
    scorer: rank::Scorer,
    top: rank::TopK,
    freq: Vec<f64>,
    /// The last row answered, and the answer.
    last: Option<(i64, Option<f64>)>,
}

unsafe extern "C" fn drop_query(p: *mut c_void) {
    // SAFETY: `p` is the Box leaked by `grove_rank` for this query, which
    // FTS5 frees once.
    unsafe { drop(Box::from_raw(p.cast::<Query>())) }
}

/// `grove_rank(fts_table, weights, books, lengths, k)`: see the module
/// documentation.
unsafe extern "C" fn grove_rank(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with its live API, context and `n_val`
    // argument values; every pointer read below comes from them and is used
    // only during this call, except the per-query state, which FTS5 owns
    // (set with xSetAuxdata, freed with `drop_query`).
    unsafe {
        let api = &*api;
        let Some(rowid) = api.xRowid else {
            return fail(ctx, c"grove_rank: FTS5 API incomplete");
        };
        let query = match query_of(api, fts, n_val, values) {
            Ok(query) => query,
            Err(why) => return fail(ctx, why),
        };
        let id = rowid(fts);
        // SQLite may evaluate the call twice for one row (in WHERE and in
        // the result): the second time answers as the first.
        let result = match query.last {
            Some((last, result)) if last == id => result,
            _ => {
                if let Err(why) = count_phrases(api, fts, &mut query.freq) {
                    return fail(ctx, why);
                }
                let Some((tie, tokens)) = query.scorer.locate(id) else {
                    return fail(ctx, c"grove_rank: a row outside the searched books");
                };
                let score = query.scorer.score(&query.freq, tokens);
                let result = query.top.offer(score, tie).then_some(score);
                query.last = Some((id, result));
                result
            }
        };
        match result {
            Some(score) => ffi::sqlite3_result_double(ctx, score),
            None => ffi::sqlite3_result_null(ctx),
        }
    }
}

/// The query's state: kept by FTS5 between rows, made from the arguments
/// (decoded once) on the first row.
///
/// # Safety
/// As for [`grove_rank`], whose arguments these are.
unsafe fn query_of<'q>(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) -> Result<&'q mut Query, &'static CStr> {
    let incomplete = c"grove_rank: FTS5 API incomplete";
    let (Some(phrase_count), Some(get_aux), Some(set_aux)) =
        (api.xPhraseCount, api.xGetAuxdata, api.xSetAuxdata)
    else {
        return Err(incomplete);
    };
    // SAFETY: the caller's live FTS5 context and arguments; the state is
    // FTS5's to keep until it calls `drop_query`.
    unsafe {
        let kept = get_aux(fts, 0).cast::<Query>();
        if !kept.is_null() {
            return Ok(&mut *kept);
        }
        if n_val != 4 || values.is_null() {
            return Err(c"grove_rank takes the table, weights, books, lengths and k");
        }
        let args = std::slice::from_raw_parts(values, 4);
        let k = ffi::sqlite3_value_int64(args[3]).max(0) as usize;
        let phrases = phrase_count(fts).max(0) as usize;
        let scorer = rank::Scorer::decode(blob(args[0]), blob(args[1]), blob(args[2]), phrases)
            .ok_or(c"grove_rank: weights or books malformed")?;
        let fresh = Box::into_raw(Box::new(Query {
            scorer,
            top: rank::TopK::new(k),
            freq: vec![0.0; phrases],
            last: None,
        }));
        if set_aux(fts, fresh.cast::<c_void>(), Some(drop_query)) != ffi::SQLITE_OK {
            return Err(c"grove_rank: out of memory");
        }
        Ok(&mut *fresh)
    }
}

/// How often each phrase occurs in the current row, into `freq`.
///
/// # Safety
/// As for [`grove_rank`], during whose call this runs.
unsafe fn count_phrases(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    freq: &mut [f64],
) -> Result<(), &'static CStr> {
    let (Some(phrase_first), Some(phrase_next)) = (api.xPhraseFirst, api.xPhraseNext) else {
        return Err(c"grove_rank: FTS5 API incomplete");
    };
    for (phrase, f) in freq.iter_mut().enumerate() {
        // SAFETY: the caller's live context; the iterator is FTS5's to
        // fill and lives only in this loop.
        unsafe {
            let mut iter: ffi::Fts5PhraseIter = std::mem::zeroed();
            let (mut column, mut offset) = (0, 0);
            if phrase_first(fts, phrase as c_int, &mut iter, &mut column, &mut offset)
                != ffi::SQLITE_OK
            {
                return Err(c"grove_rank: cannot read a phrase");
            }
            let mut n = 0u32;
            while column >= 0 {
                n += 1;
                phrase_next(fts, &mut iter, &mut column, &mut offset);
            }
            *f = f64::from(n);
        }
    }
    Ok(())
}

/// The index's tokenizer, borrowed from a connection's FTS5 (so it cannot
/// outlive the connection).
pub(crate) struct Tokenizer<'conn> {
    tokenizer: ffi::fts5_tokenizer,
    instance: *mut ffi::Fts5Tokenizer,
    _conn: std::marker::PhantomData<&'conn Connection>,
}

impl<'conn> Tokenizer<'conn> {
    /// The tokenizer grove's indexes use, FTS5's own (behind the counting
    /// pass-through when the connection has it).
    pub(crate) fn new(conn: &'conn Connection) -> rusqlite::Result<Tokenizer<'conn>> {
        let api = fts5_api(conn)?;
        // SAFETY: `api` is this connection's live FTS5 API; the module found
        // (or the stock one behind the pass-through) lives as long as the
        // connection, and the instance it creates is deleted in Drop.
        unsafe {
            let (mut tokenizer, mut user) = find_tokenizer(api)?;
            if is_counting(&tokenizer) {
                let counting = &*user.cast::<Counting>();
                (tokenizer, user) = (counting.porter, counting.porter_user);
            }
            let create = tokenizer.xCreate.ok_or_else(no_tokenizer)?;
            let mut args: Vec<*const c_char> = TOKENIZER_ARGS.iter().map(|a| a.as_ptr()).collect();
            let mut instance: *mut ffi::Fts5Tokenizer = ptr::null_mut();
            if create(user, args.as_mut_ptr(), args.len() as c_int, &mut instance) != ffi::SQLITE_OK
                || instance.is_null()
            {
                return Err(no_tokenizer());
            }
            Ok(Tokenizer {
                tokenizer,
                instance,
                _conn: std::marker::PhantomData,
            })
        }
    }

    /// The terms FTS5 makes of `word` when it is a quoted phrase of a query.
    pub(crate) fn tokens(&self, word: &str) -> rusqlite::Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        self.tokenize(word, ffi::FTS5_TOKENIZE_QUERY, &mut |t| {
            out.push(t.to_vec())
        })?;
        Ok(out)
    }

    /// Calls `f` with each term FTS5 indexes for a chunk's `text`, in order
    /// (the bytes are valid for that call).
    pub(crate) fn for_each_term(
        &self,
        text: &str,
        f: &mut dyn FnMut(&[u8]),
    ) -> rusqlite::Result<()> {
        self.tokenize(text, ffi::FTS5_TOKENIZE_DOCUMENT, f)
    }

    fn tokenize(&self, text: &str, flags: c_int, f: &mut dyn FnMut(&[u8])) -> rusqlite::Result<()> {
        unsafe extern "C" fn push(
            ctx: *mut c_void,
            _flags: c_int,
            token: *const c_char,
            n: c_int,
            _start: c_int,
            _end: c_int,
        ) -> c_int {
            // SAFETY: `ctx` is the `&mut dyn FnMut` passed below; FTS5
            // hands a token of `n` bytes valid for this call.
            unsafe {
                let f = &mut *ctx.cast::<&mut dyn FnMut(&[u8])>();
                f(std::slice::from_raw_parts(
                    token.cast::<u8>(),
                    n.max(0) as usize,
                ));
            }
            ffi::SQLITE_OK
        }
        let Ok(len) = c_int::try_from(text.len()) else {
            return Err(rusqlite::Error::ToSqlConversionFailure(
                "text too long".into(),
            ));
        };
        let mut f = f;
        // SAFETY: the instance is live (deleted only in Drop); the text and
        // the callback outlive the call.
        let rc = unsafe {
            match self.tokenizer.xTokenize {
                Some(tokenize) => tokenize(
                    self.instance,
                    (&mut f as *mut &mut dyn FnMut(&[u8])).cast::<c_void>(),
                    flags,
                    text.as_ptr().cast::<c_char>(),
                    len,
                    Some(push),
                ),
                None => ffi::SQLITE_ERROR,
            }
        };
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None))
        }
    }
}

impl Drop for Tokenizer<'_> {
    fn drop(&mut self) {
        if let Some(delete) = self.tokenizer.xDelete {
            // SAFETY: the instance was created by this tokenizer and is
            // deleted once.
            unsafe { delete(self.instance) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a connection with grove's extensions, an insert into an index
    /// hands over exactly the terms the tokenizer makes of the text, in
    /// order; the index holds the row as with FTS5's own tokenizer; and a
    /// connection without them has no pass-through.
    #[test]
    fn an_insert_hands_over_the_terms_it_indexes() {
        let conn = Connection::open_in_memory().unwrap();
        assert!(IndexedTerms::of(&conn).unwrap().is_none());
        register(&conn).unwrap();
        register(&conn).unwrap(); // a second registration changes nothing
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE f USING fts5 (text, content = '', contentless_delete = 1, tokenize = '{TOKENIZE}')"
        ))
        .unwrap();
        let text = "The whalers were running; Ahab's crew ran, and RAN again.";
        let mut expected = Vec::new();
        Tokenizer::new(&conn)
            .unwrap()
            .for_each_term(text, &mut |t| expected.push(t.to_vec()))
            .unwrap();
        assert!(expected.contains(&b"run".to_vec()), "{expected:?}");
        let indexed = IndexedTerms::of(&conn).unwrap().expect("the pass-through");
        let mut seen = Vec::new();
        let (inserted, counted) = indexed.during(&mut |t| seen.push(t.to_vec()), || {
            conn.execute("INSERT INTO f (rowid, text) VALUES (1, ?1)", [text])
        });
        assert_eq!(inserted.unwrap(), 1);
        assert!(counted);
        assert_eq!(seen, expected);
        // Outside `during`, nothing is handed over and queries still match.
        conn.execute("INSERT INTO f (rowid, text) VALUES (2, 'running')", [])
            .unwrap();
        assert_eq!(seen, expected);
        let hits: i64 = conn
            .query_row("SELECT count(*) FROM f WHERE f MATCH 'runs'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(hits, 2);
    }
}
