//! How many current chunks hold each indexed term (a search's document
//! frequencies), kept in the `term_blocks` table: the terms spread over
//! [`TERM_BLOCKS`] rows by a fixed hash, each row's blob its terms in
//! order with their counts. An ingest rewrites each block its book touches
//! once, about two thousand statements, where one upsert per distinct term
//! (some 8,400 for a 1 MiB book) took a tenth of the ingest; the blocks take
//! half that (`docs/search.md`, "A row per block of terms"). Changed only
//! in the transaction that changes the books (`index`).

use std::collections::BTreeMap;

use rusqlite::{Connection, params};

/// Rows the terms spread over: a term's block is its FNV-1a hash modulo
/// this. Stored data: changing it needs a migration.
const TERM_BLOCKS: u32 = 1024;

/// Creates the table, unless the shard has it. A block's blob holds, per
/// term, in term order, its length (u16 LE), its bytes and its count (u32
/// LE); a term is at most [`MAX_TERM_BYTES`](super::index::MAX_TERM_BYTES),
/// 32 KiB.
pub(crate) fn create_table(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS term_blocks (
            block INTEGER PRIMARY KEY,
            terms BLOB NOT NULL
        )",
    )
}

/// The block of a term.
fn block_of(term: &[u8]) -> i64 {
    let mut hash: u32 = 0x811c_9dc5;
    for &b in term {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    i64::from(hash % TERM_BLOCKS)
}

/// One term of a block's blob and its count.
type Entry<'a> = (&'a [u8], u32);

/// A block's terms and counts, in term order.
#[cfg(test)]
type Entries = Vec<(Vec<u8>, i64)>;

/// The first entry of a block's blob and the rest; `None` for a blob cut
/// short.
fn next_entry(blob: &[u8]) -> Option<(Entry<'_>, &[u8])> {
    let len = usize::from(u16::from_le_bytes(blob.get(..2)?.try_into().ok()?));
    let term = blob.get(2..2 + len)?;
    let count = u32::from_le_bytes(blob.get(2 + len..6 + len)?.try_into().ok()?);
    Some(((term, count), &blob[6 + len..]))
}

/// A block's entries; `None` for a blob that is not one.
#[cfg(test)]
fn decode(blob: &[u8]) -> Option<Entries> {
    let mut entries = Vec::new();
    let mut rest = blob;
    while !rest.is_empty() {
        let ((term, count), next) = next_entry(rest)?;
        entries.push((term.to_vec(), i64::from(count)));
        rest = next;
    }
    Some(entries)
}

/// A term's count in a block's blob (0 when it is not there), read in
/// place: a search looks up a few terms, each in a block of hundreds.
fn find(blob: &[u8], wanted: &[u8]) -> Option<u64> {
    let mut rest = blob;
    while !rest.is_empty() {
        let ((term, count), next) = next_entry(rest)?;
        match term.cmp(wanted) {
            std::cmp::Ordering::Less => rest = next,
            std::cmp::Ordering::Equal => return Some(u64::from(count)),
            std::cmp::Ordering::Greater => return Some(0),
        }
    }
    Some(0)
}

/// `f` of a block's stored blob (an empty one when the block has no row);
/// `f` answers `None` for a blob that is not a block's, an error here.
fn read_block<T>(
    conn: &Connection,
    block: i64,
    f: impl FnOnce(&[u8]) -> Option<T>,
) -> rusqlite::Result<T> {
    let mut stmt = conn.prepare_cached("SELECT terms FROM term_blocks WHERE block = ?1")?;
    let mut rows = stmt.query([block])?;
    let stored = match rows.next()? {
        Some(r) => r.get_ref(0)?.as_blob()?,
        None => &[],
    };
    f(stored).ok_or_else(|| malformed(block))
}

fn malformed(block: i64) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Blob,
        format!("term block {block} is malformed").into(),
    )
}

/// Writes into `out` the blob of `stored` (a block's blob) with each
/// change of `changes` (both in term order) added; a term whose count falls
/// to zero or below leaves. `None` for a stored blob that is not one.
fn merge_into(stored: &[u8], changes: &[(&[u8], i64)], out: &mut Vec<u8>) -> Option<()> {
    let mut push = |term: &[u8], count: i64| {
        if count > 0 {
            // Terms are cut at 32 KiB (a lossy end adds at most two bytes).
            debug_assert!(term.len() <= usize::from(u16::MAX));
            out.extend_from_slice(&(term.len() as u16).to_le_bytes());
            out.extend_from_slice(term);
            out.extend_from_slice(&(count.min(i64::from(u32::MAX)) as u32).to_le_bytes());
        }
    };
    let mut changes = changes.iter().peekable();
    let mut rest = stored;
    while !rest.is_empty() {
        let ((term, count), next) = next_entry(rest)?;
        rest = next;
        while let Some(&&(new, n)) = changes.peek().filter(|(t, _)| *t < term) {
            push(new, n);
            changes.next();
        }
        match changes.peek() {
            Some(&&(t, n)) if t == term => {
                push(term, i64::from(count) + n);
                changes.next();
            }
            _ => push(term, i64::from(count)),
        }
    }
    for &(t, n) in changes {
        push(t, n);
    }
    Some(())
}

/// Adds `sign` times each count of `counts` (terms in order, each once) to
/// the stored counts: +1 for a version entering search, -1 for one
/// leaving it.
pub(crate) fn add(conn: &Connection, counts: &[(&[u8], i64)], sign: i64) -> rusqlite::Result<()> {
    let mut blocks: BTreeMap<i64, Vec<(&[u8], i64)>> = BTreeMap::new();
    for &(term, count) in counts {
        blocks
            .entry(block_of(term))
            .or_default()
            .push((term, sign * count));
    }
    let mut write = conn.prepare_cached(
        "INSERT INTO term_blocks (block, terms) VALUES (?1, ?2)
         ON CONFLICT (block) DO UPDATE SET terms = excluded.terms",
    )?;
    let mut blob = Vec::new();
    for (block, changes) in blocks {
        blob.clear();
        read_block(conn, block, |stored| {
            merge_into(stored, &changes, &mut blob)
        })?;
        if blob.is_empty() {
            conn.prepare_cached("DELETE FROM term_blocks WHERE block = ?1")?
                .execute([block])?;
        } else {
            write.execute(params![block, blob])?;
        }
    }
    Ok(())
}

/// Current chunks holding an indexed term.
pub(crate) fn chunks_holding(conn: &Connection, term: &str) -> rusqlite::Result<u64> {
    let term = term.as_bytes();
    read_block(conn, block_of(term), |blob| find(blob, term))
}

/// Moves the counts of the `terms` table (one row per term, schemas 2 and
/// 3) into blocks and drops it (schema step 4).
pub(crate) fn move_from_terms_table(conn: &Connection) -> rusqlite::Result<()> {
    create_table(conn)?;
    let rows: Vec<(String, i64)> = conn
        .prepare("SELECT term, chunks FROM terms WHERE chunks > 0 ORDER BY term")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let counts: Vec<(&[u8], i64)> = rows.iter().map(|(t, n)| (t.as_bytes(), *n)).collect();
    add(conn, &counts, 1)?;
    conn.execute_batch("DROP TABLE terms")
}

/// Every stored term with its count, for tests that compare them with a
/// fresh index.
#[cfg(test)]
pub(crate) fn all(conn: &Connection) -> rusqlite::Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    let mut stmt = conn.prepare("SELECT block, terms FROM term_blocks")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let block: i64 = r.get(0)?;
        let entries = decode(r.get_ref(1)?.as_blob()?).ok_or_else(|| malformed(block))?;
        for (term, count) in entries {
            assert_eq!(block_of(&term), block, "a term in another's block");
            out.insert(String::from_utf8_lossy(&term).into_owned(), count);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[(&str, i64)]) -> Entries {
        list.iter()
            .map(|(t, n)| (t.as_bytes().to_vec(), *n))
            .collect()
    }

    fn merged(stored: &[u8], changes: &[(&[u8], i64)]) -> Vec<u8> {
        let mut out = Vec::new();
        merge_into(stored, changes, &mut out).expect("a blob");
        out
    }

    /// Changes merge in term order, new terms enter in place and a term
    /// whose count falls to zero leaves; a term is found in place; a blob
    /// cut short is not one.
    #[test]
    fn counts_merge_in_order_and_zeros_leave() {
        let stored = merged(&[], &[(b"bark", 2), (b"sea", 5), (b"whale", 1)]);
        assert_eq!(
            decode(&stored),
            Some(entries(&[("bark", 2), ("sea", 5), ("whale", 1)]))
        );
        let changes: Vec<(&[u8], i64)> = vec![
            (b"ahab", 1),
            (b"sea", 2),
            (b"ship", 3),
            (b"whale", -1),
            (b"zed", 1),
        ];
        let blob = merged(&stored, &changes);
        assert_eq!(
            decode(&blob),
            Some(entries(&[
                ("ahab", 1),
                ("bark", 2),
                ("sea", 7),
                ("ship", 3),
                ("zed", 1)
            ]))
        );
        assert_eq!(find(&blob, b"sea"), Some(7));
        assert_eq!(find(&blob, b"ahab"), Some(1));
        assert_eq!(find(&blob, b"zed"), Some(1));
        assert_eq!(find(&blob, b"bar"), Some(0));
        assert_eq!(find(&blob, b"zzz"), Some(0));
        assert_eq!(decode(&[]), Some(Vec::new()));
        assert_eq!(decode(&[5, 0, b'a']), None, "a term cut short");
        assert_eq!(decode(&[1, 0, b'a', 1]), None, "a count cut short");
        let mut out = Vec::new();
        assert_eq!(merge_into(&[1, 0, b'a', 1], &changes, &mut out), None);
    }

    /// Through the table: counts added and taken back, looked up by term,
    /// and a malformed block is an error, not a panic.
    #[test]
    fn a_term_is_found_in_its_block() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE term_blocks (block INTEGER PRIMARY KEY, terms BLOB NOT NULL)",
        )
        .unwrap();
        let book: Vec<(&[u8], i64)> = vec![(b"sea", 4), (b"whale", 2)];
        add(&conn, &book, 1).unwrap();
        add(&conn, &[(b"sea".as_slice(), 1)], 1).unwrap();
        assert_eq!(chunks_holding(&conn, "sea").unwrap(), 5);
        assert_eq!(chunks_holding(&conn, "whale").unwrap(), 2);
        assert_eq!(chunks_holding(&conn, "ship").unwrap(), 0);
        add(&conn, &book, -1).unwrap();
        assert_eq!(chunks_holding(&conn, "sea").unwrap(), 1);
        assert_eq!(all(&conn).unwrap().len(), 1);
        add(&conn, &[(b"sea".as_slice(), 1)], -1).unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM term_blocks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0, "an emptied block leaves");
        conn.execute(
            "INSERT INTO term_blocks (block, terms) VALUES (?1, x'0900')",
            [block_of(b"sea")],
        )
        .unwrap();
        assert!(chunks_holding(&conn, "sea").is_err());
    }
}
