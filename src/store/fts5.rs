//! The two FTS5 extension points grove's collection-wide ranking needs, over
//! SQLite's C API: the `grove_bm25` ranking function (FTS5's own `bm25()`,
//! fed the collection's statistics instead of its table's), and the index's
//! tokenizer, to find the indexed terms of a query's words.
//!
//! `grove_bm25(fts_table, weights)`: `weights` is a blob of little-endian
//! f64s, the collection's average chunk length then one IDF per phrase of
//! the query; the result is the chunk's score, higher is better. Scoring
//! itself is [`rank::bm25`]; this file only reads FTS5's counts.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;

use rusqlite::Connection;
use rusqlite::ffi;

use super::rank;

/// The tokenizer every grove index is created with.
pub(crate) const TOKENIZE: &str = "porter unicode61 remove_diacritics 2";
const TOKENIZER_NAME: &CStr = c"porter";
const TOKENIZER_ARGS: [&CStr; 3] = [c"unicode61", c"remove_diacritics", c"2"];

const FUNCTION_NAME: &CStr = c"grove_bm25";

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

/// Registers `grove_bm25` on a connection (each connection, once).
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
                Some(grove_bm25),
                None,
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

/// Reports an error from inside the ranking function.
///
/// # Safety
/// `ctx` must be the function's live context.
unsafe fn fail(ctx: *mut ffi::sqlite3_context, message: &CStr) {
    // SAFETY: the caller's context; SQLite copies the message.
    unsafe { ffi::sqlite3_result_error(ctx, message.as_ptr(), -1) }
}

/// `grove_bm25(fts_table, weights)`: see the module documentation.
unsafe extern "C" fn grove_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with its live API, context and `n_val`
    // argument values; every pointer read below comes from them and is used
    // only during this call.
    unsafe {
        if n_val != 1 {
            return fail(ctx, c"grove_bm25 takes the table and one weights blob");
        }
        let value = *values;
        let bytes = ffi::sqlite3_value_bytes(value);
        let blob = ffi::sqlite3_value_blob(value).cast::<u8>();
        let (Some(phrase_count), Some(inst_count), Some(inst), Some(column_size)) = (
            (*api).xPhraseCount,
            (*api).xInstCount,
            (*api).xInst,
            (*api).xColumnSize,
        ) else {
            return fail(ctx, c"grove_bm25: FTS5 API incomplete");
        };
        let phrases = phrase_count(fts).max(0) as usize;
        if blob.is_null() || bytes as usize != 8 * (phrases + 1) {
            return fail(ctx, c"grove_bm25: weights do not match the query's phrases");
        }
        let weights: Vec<f64> = std::slice::from_raw_parts(blob, bytes as usize)
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect();
        let (avgdl, idf) = (weights[0], &weights[1..]);
        let mut freq = vec![0.0f64; phrases];
        let mut n_inst: c_int = 0;
        if inst_count(fts, &mut n_inst) != ffi::SQLITE_OK {
            return fail(ctx, c"grove_bm25: cannot count instances");
        }
        for i in 0..n_inst {
            let (mut phrase, mut column, mut offset) = (0, 0, 0);
            if inst(fts, i, &mut phrase, &mut column, &mut offset) != ffi::SQLITE_OK {
                return fail(ctx, c"grove_bm25: cannot read an instance");
            }
            if let Some(f) = freq.get_mut(phrase as usize) {
                *f += 1.0;
            }
        }
        let mut tokens: c_int = 0;
        if column_size(fts, -1, &mut tokens) != ffi::SQLITE_OK {
            return fail(ctx, c"grove_bm25: cannot read the chunk's length");
        }
        let score = rank::bm25(idf, avgdl, &freq, tokens as f64);
        ffi::sqlite3_result_double(ctx, score);
    }
}

/// The weights blob `grove_bm25` takes for `ranking`.
pub(crate) fn weights(ranking: &rank::Ranking) -> Vec<u8> {
    std::iter::once(ranking.avgdl)
        .chain(ranking.idf.iter().copied())
        .flat_map(f64::to_le_bytes)
        .collect()
}

/// The index's tokenizer, borrowed from a connection's FTS5 (so it cannot
/// outlive the connection).
pub(crate) struct Tokenizer<'conn> {
    tokenizer: ffi::fts5_tokenizer,
    instance: *mut ffi::Fts5Tokenizer,
    _conn: std::marker::PhantomData<&'conn Connection>,
}

impl<'conn> Tokenizer<'conn> {
    /// The tokenizer grove's indexes use, as this connection's FTS5 has it.
    pub(crate) fn new(conn: &'conn Connection) -> rusqlite::Result<Tokenizer<'conn>> {
        let api = fts5_api(conn)?;
        let none = || {
            rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_ERROR),
                Some(format!("FTS5 has no tokenizer `{TOKENIZE}`")),
            )
        };
        // SAFETY: `api` is this connection's live FTS5 API; `tokenizer` is
        // filled in by it, and the instance it creates is deleted in Drop.
        unsafe {
            let find = (*api).xFindTokenizer.ok_or_else(none)?;
            let mut user: *mut c_void = ptr::null_mut();
            let mut tokenizer: ffi::fts5_tokenizer = std::mem::zeroed();
            if find(api, TOKENIZER_NAME.as_ptr(), &mut user, &mut tokenizer) != ffi::SQLITE_OK {
                return Err(none());
            }
            let create = tokenizer.xCreate.ok_or_else(none)?;
            let mut args: Vec<*const c_char> = TOKENIZER_ARGS.iter().map(|a| a.as_ptr()).collect();
            let mut instance: *mut ffi::Fts5Tokenizer = ptr::null_mut();
            if create(user, args.as_mut_ptr(), args.len() as c_int, &mut instance) != ffi::SQLITE_OK
                || instance.is_null()
            {
                return Err(none());
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
        unsafe extern "C" fn push(
            ctx: *mut c_void,
            _flags: c_int,
            token: *const c_char,
            n: c_int,
            _start: c_int,
            _end: c_int,
        ) -> c_int {
            // SAFETY: `ctx` is the Vec passed below; FTS5 hands a token of
            // `n` bytes valid for this call.
            unsafe {
                let out = &mut *ctx.cast::<Vec<Vec<u8>>>();
                out.push(
                    std::slice::from_raw_parts(token.cast::<u8>(), n.max(0) as usize).to_vec(),
                );
            }
            ffi::SQLITE_OK
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        let Ok(len) = c_int::try_from(word.len()) else {
            return Err(rusqlite::Error::ToSqlConversionFailure(
                "word too long".into(),
            ));
        };
        // SAFETY: the instance is live (deleted only in Drop); the text and
        // the output Vec outlive the call.
        let rc = unsafe {
            match self.tokenizer.xTokenize {
                Some(tokenize) => tokenize(
                    self.instance,
                    (&mut out as *mut Vec<Vec<u8>>).cast::<c_void>(),
                    ffi::FTS5_TOKENIZE_QUERY,
                    word.as_ptr().cast::<c_char>(),
                    len,
                    Some(push),
                ),
                None => ffi::SQLITE_ERROR,
            }
        };
        if rc == ffi::SQLITE_OK {
            Ok(out)
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
