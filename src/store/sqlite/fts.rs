//! `memlane_terms(memories_fts)`: an FTS5 auxiliary function that reports, for the current
//! row of a full-text query, how often each phrase of the query occurs in each column and how
//! long the row is, so that BM25 can be computed outside SQLite.
//!
//! FTS5's own `bm25()` counts, for every query, the rows containing each phrase by walking
//! the phrase's whole posting list: a word present in most of 100,000 memories costs about
//! 2 ms per query even when the query only ranks one user's memories. With this function the
//! SQLite store reads only the rows it ranks, and takes the document frequencies from a
//! cache (see `DocFrequencies` in the SQLite store).
//!
//! One of the crate's two unsafe modules (with the index's mapped vectors; the encoder's
//! matrix products and the local model's kernels are in `memlane-kernels`): SQLite
//! registers auxiliary functions through a C vtable. Every pointer comes from SQLite, every
//! return code is checked, and the callback runs under `catch_unwind`, so no panic crosses
//! into C.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use rusqlite::ffi;
use rusqlite::Connection;

/// The SQL name of the function.
pub(super) const FUNCTION: &CStr = c"memlane_terms";

/// What [`FUNCTION`] returns for one row, decoded.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FtsRow {
    /// Rows in the whole full-text table.
    pub rows: i64,
    /// Tokens in the whole table, all columns.
    pub table_tokens: i64,
    /// Tokens in this row, all columns.
    pub row_tokens: i64,
    /// For each phrase of the query, its occurrences in this row per column (the first
    /// [`COLUMNS`] columns only).
    pub counts: Vec<[u32; COLUMNS]>,
}

/// The columns whose occurrences are reported (memory text and context).
pub(super) const COLUMNS: usize = 2;

const HEADER: usize = 8 * 3;

impl FtsRow {
    /// Decodes the function's blob: three little-endian `i64` (rows, table tokens, row
    /// tokens), then [`COLUMNS`] little-endian `u32` per phrase.
    pub(super) fn decode(blob: &[u8]) -> Option<FtsRow> {
        let (head, body) = blob.split_at_checked(HEADER)?;
        if body.len() % (4 * COLUMNS) != 0 {
            return None;
        }
        let int =
            |i: usize| i64::from_le_bytes(head[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]));
        let counts = body
            .chunks_exact(4 * COLUMNS)
            .map(|phrase| {
                let mut out = [0u32; COLUMNS];
                for (slot, bytes) in out.iter_mut().zip(phrase.chunks_exact(4)) {
                    *slot = u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4]));
                }
                out
            })
            .collect();
        Some(FtsRow {
            rows: int(0),
            table_tokens: int(1),
            row_tokens: int(2),
            counts,
        })
    }
}

/// Registers [`FUNCTION`] on a connection. Every connection that runs a query using it must
/// have it registered.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    // SAFETY: `handle` is the live connection owned by `conn`, used on this thread only for
    // the duration of the call.
    let rc = unsafe { register_raw(conn.handle()) };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(rc),
            Some("cannot register the FTS5 function memlane_terms".into()),
        ))
    }
}

/// # Safety
/// `db` must be a valid, open connection not used concurrently.
unsafe fn register_raw(db: *mut ffi::sqlite3) -> c_int {
    // The documented way to reach the FTS5 API: `SELECT fts5(?1)` with a pointer bound
    // under the type "fts5_api_ptr", which FTS5 fills in.
    let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
    let rc = ffi::sqlite3_prepare_v2(
        db,
        c"SELECT fts5(?1)".as_ptr(),
        -1,
        &mut stmt,
        ptr::null_mut(),
    );
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    let mut rc = ffi::sqlite3_bind_pointer(
        stmt,
        1,
        (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
        c"fts5_api_ptr".as_ptr(),
        None,
    );
    if rc == ffi::SQLITE_OK {
        rc = ffi::sqlite3_step(stmt);
    }
    let finalized = ffi::sqlite3_finalize(stmt);
    if rc != ffi::SQLITE_ROW {
        return if rc == ffi::SQLITE_OK {
            ffi::SQLITE_ERROR
        } else {
            rc
        };
    }
    if finalized != ffi::SQLITE_OK {
        return finalized;
    }
    // Version 2 is the first with a stable xCreateFunction; SQLite 3.50 ships version 3 or 4.
    if api.is_null() || (*api).iVersion < 2 {
        return ffi::SQLITE_ERROR;
    }
    let Some(create) = (*api).xCreateFunction else {
        return ffi::SQLITE_ERROR;
    };
    create(
        api,
        FUNCTION.as_ptr(),
        ptr::null_mut(),
        Some(row_terms),
        None,
    )
}

/// The auxiliary function's callback.
///
/// # Safety
/// Called by SQLite only, with the pointers of the FTS5 extension API.
unsafe extern "C" fn row_terms(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    _argc: c_int,
    _argv: *mut *mut ffi::sqlite3_value,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the pointers are the ones SQLite passed for this call.
        unsafe { collect(api, fts) }
    }));
    match outcome {
        Ok(Ok(blob)) => match c_int::try_from(blob.len()) {
            Ok(len) => {
                ffi::sqlite3_result_blob(ctx, blob.as_ptr().cast(), len, ffi::SQLITE_TRANSIENT())
            }
            Err(_) => ffi::sqlite3_result_error_toobig(ctx),
        },
        Ok(Err(rc)) => ffi::sqlite3_result_error_code(ctx, rc),
        Err(_) => ffi::sqlite3_result_error(ctx, c"memlane_terms panicked".as_ptr(), -1),
    }
}

/// # Safety
/// `api` and `fts` must be the pointers SQLite passed to the auxiliary function.
unsafe fn collect(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
) -> Result<Vec<u8>, c_int> {
    let api = api.as_ref().ok_or(ffi::SQLITE_MISUSE)?;
    let (
        Some(phrase_count),
        Some(inst_count),
        Some(inst),
        Some(row_count),
        Some(total_size),
        Some(column_size),
    ) = (
        api.xPhraseCount,
        api.xInstCount,
        api.xInst,
        api.xRowCount,
        api.xColumnTotalSize,
        api.xColumnSize,
    )
    else {
        return Err(ffi::SQLITE_MISUSE);
    };
    let check = |rc: c_int| {
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(rc)
        }
    };

    let phrases = usize::try_from(phrase_count(fts)).map_err(|_| ffi::SQLITE_CORRUPT)?;
    let mut counts = vec![[0u32; COLUMNS]; phrases];
    let mut instances: c_int = 0;
    check(inst_count(fts, &mut instances))?;
    for i in 0..instances {
        let (mut phrase, mut column, mut offset) = (0, 0, 0);
        check(inst(fts, i, &mut phrase, &mut column, &mut offset))?;
        if let (Ok(p), Ok(c)) = (usize::try_from(phrase), usize::try_from(column)) {
            if let Some(slot) = counts.get_mut(p).and_then(|row| row.get_mut(c)) {
                *slot = slot.saturating_add(1);
            }
        }
    }
    let mut rows: ffi::sqlite3_int64 = 0;
    check(row_count(fts, &mut rows))?;
    let mut table_tokens: ffi::sqlite3_int64 = 0;
    check(total_size(fts, -1, &mut table_tokens))?;
    let mut row_tokens: c_int = 0;
    check(column_size(fts, -1, &mut row_tokens))?;

    let mut blob = Vec::with_capacity(HEADER + phrases * 4 * COLUMNS);
    blob.extend_from_slice(&rows.to_le_bytes());
    blob.extend_from_slice(&table_tokens.to_le_bytes());
    blob.extend_from_slice(&i64::from(row_tokens).to_le_bytes());
    for phrase in &counts {
        for count in phrase {
            blob.extend_from_slice(&count.to_le_bytes());
        }
    }
    Ok(blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_rejects_truncated_blobs() {
        assert_eq!(FtsRow::decode(&[0; 7]), None);
        assert_eq!(FtsRow::decode(&[0; HEADER + 3]), None);
        let mut blob = Vec::new();
        for v in [10i64, 40, 4] {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        for v in [2u32, 0, 0, 1] {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(
            FtsRow::decode(&blob),
            Some(FtsRow {
                rows: 10,
                table_tokens: 40,
                row_tokens: 4,
                counts: vec![[2, 0], [0, 1]],
            })
        );
    }
}
