//! Parquet: flat files of the usual column types read column by column, any other schema through the
//! crate's row iterator; both give the same cells.

use std::borrow::Cow;

use chrono::DateTime;
use rayon::prelude::*;
use rust_decimal::Decimal;

use super::{Cell, Storage, Table, file_error};
use crate::data::time::epoch;
use crate::data::validate::{IssueClass, LoadReport};

/// Parquet: flat files of the usual column types are read column by column (each column's pages decoded
/// in one pass, the columns in parallel); other schemas (nested columns, INT96, unsigned or unusual
/// logical types) go through the row iterator ([`read_parquet_rows`]). Both give the same cells.
pub(super) fn read_parquet(name: &str, data: bytes::Bytes) -> Result<Table<'static>, LoadReport> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let bad =
        |e: parquet::errors::ParquetError| file_error(name, IssueClass::BadRow, format!("unreadable Parquet: {e}"));
    let reader = SerializedFileReader::new(data.clone()).map_err(bad)?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let kinds: Option<Vec<ParquetKind>> = schema.columns().iter().map(|c| ParquetKind::of(c)).collect();
    let Some(kinds) = kinds else { return read_parquet_rows(name, &data) };
    let headers: Vec<String> = schema.columns().iter().map(|c| c.name().to_owned()).collect();
    let n_rows = usize::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0);
    let columns = kinds
        .par_iter()
        .enumerate()
        .map(|(c, kind)| {
            // Each column reads the file on its own (a reader per thread over the shared bytes).
            let reader = SerializedFileReader::new(data.clone())?;
            let mut values = ParquetColumn::Cells(Vec::new());
            for g in 0..reader.num_row_groups() {
                let group = reader.get_row_group(g)?;
                let rows = usize::try_from(group.metadata().num_rows()).unwrap_or(0);
                kind.read(group.get_column_reader(c)?, rows, &mut values)?;
            }
            Ok(values)
        })
        .collect::<Result<Vec<ParquetColumn>, parquet::errors::ParquetError>>()
        .map_err(bad)?;
    if columns.iter().any(|c| c.len() != n_rows) {
        return read_parquet_rows(name, &data);
    }
    let mut table = Table::new(headers);
    table.rows = (1..=n_rows).collect();
    table.storage = Storage::Columns(columns);
    Ok(table)
}

/// A Parquet column as read: its plain values (8 bytes a row, made into a cell when its row is built) while
/// every slot has one, or cells (a column with nulls, text, decimals, dates).
pub(super) enum ParquetColumn {
    Floats(Vec<f64>),
    Ints(Vec<i64>),
    /// Timestamps in units of 1/`.1` second since the epoch (1,000 or 1,000,000).
    Stamps(Vec<i64>, i64),
    Cells(Vec<Cell<'static>>),
}

/// A timestamp cell (`Null` out of range), as the row iterator gives it.
fn time_cell(t: Option<DateTime<chrono::Utc>>) -> Cell<'static> {
    t.map_or(Cell::Null, |t| Cell::Time(t.fixed_offset()))
}

/// `DateTime::from_timestamp_millis` (`per_second` 1,000) or `_micros` (1,000,000) of `v`, with the
/// calendar date of the thread's last day kept: consecutive bars mostly share a day, and turning a day
/// number into a date was the most expensive part of reading a timestamp.
fn stamp_time(v: i64, per_second: i64) -> Option<DateTime<chrono::Utc>> {
    use chrono::{NaiveDate, NaiveTime};
    thread_local!(static LAST_DAY: std::cell::Cell<Option<(i64, NaiveDate)>> = const { std::cell::Cell::new(None) });
    let per_day = 86_400 * per_second;
    let (day, within) = (v.div_euclid(per_day), v.rem_euclid(per_day));
    let date = match LAST_DAY.get() {
        Some((d, date)) if d == day => date,
        _ => {
            // Days from 0001-01-01 (day 1 of the common era) to 1970-01-01: 719,163.
            let date = NaiveDate::from_num_days_from_ce_opt(i32::try_from(day.checked_add(719_163)?).ok()?)?;
            LAST_DAY.set(Some((day, date)));
            date
        }
    };
    let nanos = (within % per_second) * (1_000_000_000 / per_second);
    let time = NaiveTime::from_num_seconds_from_midnight_opt((within / per_second) as u32, nanos as u32)?;
    Some(date.and_time(time).and_utc())
}

impl ParquetColumn {
    fn len(&self) -> usize {
        match self {
            Self::Floats(v) => v.len(),
            Self::Ints(v) | Self::Stamps(v, _) => v.len(),
            Self::Cells(v) => v.len(),
        }
    }

    /// Row `i`'s cell.
    pub(super) fn cell(&self, i: usize) -> Cell<'static> {
        match self {
            Self::Floats(v) => Cell::Float(v[i]),
            Self::Ints(v) => Cell::Int(v[i]),
            Self::Stamps(v, unit) => time_cell(stamp_time(v[i], *unit)),
            Self::Cells(v) => v[i].clone(),
        }
    }

    /// The column as cells (plain values become cells, for a later row group with nulls).
    fn cells(&mut self) -> &mut Vec<Cell<'static>> {
        if !matches!(self, Self::Cells(_)) {
            let cells = (0..self.len()).map(|i| self.cell(i)).collect();
            *self = Self::Cells(cells);
        }
        let Self::Cells(cells) = self else { unreachable!("made cells above") };
        cells
    }

    /// Appends a row group's floats (no nulls) when the column holds floats or nothing yet; `false`
    /// otherwise (the caller then spreads them as cells).
    fn extend_floats(&mut self, values: &mut Vec<f64>) -> bool {
        match self {
            // The first row group's vector becomes the column's (no copy).
            Self::Cells(c) if c.is_empty() => *self = Self::Floats(std::mem::take(values)),
            Self::Floats(v) => v.extend_from_slice(values),
            _ => return false,
        }
        true
    }

    /// Appends a row group's integers (no nulls): timestamps of `unit` per second, or plain integers
    /// (`unit` `None`), when the column holds the same or nothing yet; `false` otherwise.
    fn extend_ints(&mut self, values: &mut Vec<i64>, unit: Option<i64>) -> bool {
        match (&mut *self, unit) {
            (Self::Cells(c), _) if c.is_empty() => {
                let v = std::mem::take(values);
                *self = match unit {
                    Some(u) => Self::Stamps(v, u),
                    None => Self::Ints(v),
                };
            }
            (Self::Ints(v), None) => v.extend_from_slice(values),
            (Self::Stamps(v, held), Some(u)) if *held == u => v.extend_from_slice(values),
            _ => return false,
        }
        true
    }
}

/// How a flat Parquet column becomes cells (as the row iterator's fields would).
#[derive(Clone, Copy, Debug)]
enum ParquetKind {
    Int,
    Float,
    Bool,
    Text,
    /// Days since the epoch.
    Date,
    /// Units per second (1e3, 1e6, 1e9) since the epoch.
    Timestamp(i64),
    /// An unscaled integer (INT32, INT64 or big-endian bytes) and its scale and precision.
    Decimal(i32, i32),
}

impl ParquetKind {
    /// `None` for what the column reader does not take (the row iterator does).
    fn of(c: &parquet::schema::types::ColumnDescriptor) -> Option<Self> {
        use parquet::basic::{ConvertedType, LogicalType, TimeUnit, Type};
        if c.max_rep_level() > 0 || c.max_def_level() > 1 {
            return None;
        }
        let decimal = Self::Decimal(c.type_scale(), c.type_precision());
        let logical = c.logical_type_ref();
        let converted = c.converted_type();
        Some(match (c.physical_type(), logical, converted) {
            (Type::INT32 | Type::INT64, Some(LogicalType::Decimal(_)), _)
            | (Type::INT32 | Type::INT64, _, ConvertedType::DECIMAL) => decimal,
            (Type::INT32, Some(LogicalType::Date), _) | (Type::INT32, _, ConvertedType::DATE) => Self::Date,
            (Type::INT64, Some(LogicalType::Timestamp(t)), _) => Self::Timestamp(match t.unit {
                TimeUnit::MILLIS => 1_000,
                TimeUnit::MICROS => 1_000_000,
                TimeUnit::NANOS => return None,
            }),
            (Type::INT64, None, ConvertedType::TIMESTAMP_MILLIS) => Self::Timestamp(1_000),
            (Type::INT64, None, ConvertedType::TIMESTAMP_MICROS) => Self::Timestamp(1_000_000),
            (Type::INT32 | Type::INT64, None, ConvertedType::NONE) => Self::Int,
            (Type::INT32 | Type::INT64, Some(LogicalType::Integer(i)), _) if i.is_signed => Self::Int,
            (
                Type::INT32 | Type::INT64,
                None,
                ConvertedType::INT_8 | ConvertedType::INT_16 | ConvertedType::INT_32 | ConvertedType::INT_64,
            ) => Self::Int,
            (Type::FLOAT | Type::DOUBLE, None, ConvertedType::NONE) => Self::Float,
            (Type::BOOLEAN, None, ConvertedType::NONE) => Self::Bool,
            (Type::BYTE_ARRAY, Some(LogicalType::String), _) | (Type::BYTE_ARRAY, None, ConvertedType::UTF8) => {
                Self::Text
            }
            (Type::BYTE_ARRAY | Type::FIXED_LEN_BYTE_ARRAY, Some(LogicalType::Decimal(_)), _)
            | (Type::BYTE_ARRAY | Type::FIXED_LEN_BYTE_ARRAY, _, ConvertedType::DECIMAL) => decimal,
            _ => return None,
        })
    }

    /// Appends one row group's column: plain values while the column has no nulls, else cells (nulls
    /// where the definition level says so).
    fn read(
        self,
        column: parquet::column::reader::ColumnReader,
        rows: usize,
        out: &mut ParquetColumn,
    ) -> parquet::errors::Result<()> {
        use parquet::column::reader::ColumnReader;
        let full = |defs: &[i16]| defs.iter().all(|&d| d > 0);
        let scaled = |v: i64, scale: i32| {
            u32::try_from(scale)
                .ok()
                .and_then(|s| Decimal::try_from_i128_with_scale(i128::from(v), s).ok())
                .map_or(Cell::Null, Cell::Decimal)
        };
        match (self, column) {
            (kind, ColumnReader::Int32ColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                match kind {
                    Self::Date => spread(out.cells(), values, &defs, |d| {
                        epoch(i64::from(d) * 86_400).map_or(Cell::Null, Cell::Time)
                    }),
                    Self::Decimal(scale, _) => spread(out.cells(), values, &defs, |v| scaled(i64::from(v), scale)),
                    _ if full(&defs) && out.extend_ints(&mut values.iter().map(|&v| i64::from(v)).collect(), None) => {}
                    _ => spread(out.cells(), values, &defs, |v| Cell::Int(i64::from(v))),
                }
            }
            (kind, ColumnReader::Int64ColumnReader(r)) => {
                let (mut values, defs) = read_all(r, rows)?;
                match kind {
                    Self::Timestamp(unit) if full(&defs) && out.extend_ints(&mut values, Some(unit)) => {}
                    Self::Int if full(&defs) && out.extend_ints(&mut values, None) => {}
                    Self::Timestamp(unit) => spread(out.cells(), values, &defs, |v| time_cell(stamp_time(v, unit))),
                    Self::Decimal(scale, _) => spread(out.cells(), values, &defs, |v| scaled(v, scale)),
                    _ => spread(out.cells(), values, &defs, Cell::Int),
                }
            }
            (_, ColumnReader::FloatColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                if !(full(&defs) && out.extend_floats(&mut values.iter().map(|&v| f64::from(v)).collect())) {
                    spread(out.cells(), values, &defs, |v| Cell::Float(f64::from(v)));
                }
            }
            (_, ColumnReader::DoubleColumnReader(r)) => {
                let (mut values, defs) = read_all(r, rows)?;
                if !(full(&defs) && out.extend_floats(&mut values)) {
                    spread(out.cells(), values, &defs, Cell::Float);
                }
            }
            (_, ColumnReader::BoolColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| Cell::Text(Cow::Owned(v.to_string())));
            }
            (Self::Decimal(scale, precision), ColumnReader::ByteArrayColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| {
                    let d = parquet::data_type::Decimal::from_bytes(v, precision, scale);
                    parquet_decimal(&d).map_or(Cell::Null, Cell::Decimal)
                });
            }
            (_, ColumnReader::ByteArrayColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| {
                    Cell::Text(Cow::Owned(String::from_utf8_lossy(v.data()).into_owned()))
                });
            }
            (Self::Decimal(scale, precision), ColumnReader::FixedLenByteArrayColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| {
                    let d = parquet::data_type::Decimal::from_bytes(v.into(), precision, scale);
                    parquet_decimal(&d).map_or(Cell::Null, Cell::Decimal)
                });
            }
            (_, _) => {
                return Err(parquet::errors::ParquetError::General(
                    "a column type the column reader does not take".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Every value and definition level of a column chunk of `rows` rows (read into vectors of that
/// capacity: no regrowing).
fn read_all<T: parquet::data_type::DataType>(
    mut r: parquet::column::reader::ColumnReaderImpl<T>,
    rows: usize,
) -> parquet::errors::Result<(Vec<T::T>, Vec<i16>)> {
    let (mut values, mut defs) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    loop {
        let (records, _, _) = r.read_records(1 << 16, Some(&mut defs), None, &mut values)?;
        if records == 0 {
            return Ok((values, defs));
        }
    }
}

/// `cell(value)` for each defined slot, `Null` for the others (no levels: every slot is defined).
fn spread<V>(out: &mut Vec<Cell<'static>>, values: Vec<V>, defs: &[i16], mut cell: impl FnMut(V) -> Cell<'static>) {
    if defs.is_empty() || defs.iter().all(|&d| d > 0) {
        out.extend(values.into_iter().map(cell));
        return;
    }
    let mut values = values.into_iter();
    out.extend(defs.iter().map(|&d| if d > 0 { values.next().map_or(Cell::Null, &mut cell) } else { Cell::Null }));
}

/// Parquet through the crate's row iterator (any schema: what the column reader does not take).
fn read_parquet_rows(name: &str, bytes: &[u8]) -> Result<Table<'static>, LoadReport> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let bad =
        |e: parquet::errors::ParquetError| file_error(name, IssueClass::BadRow, format!("unreadable Parquet: {e}"));
    let reader = SerializedFileReader::new(bytes::Bytes::copy_from_slice(bytes)).map_err(bad)?;
    let headers: Vec<String> =
        reader.metadata().file_metadata().schema_descr().columns().iter().map(|c| c.name().to_owned()).collect();
    let mut table = Table::new(headers);
    for (i, row) in reader.get_row_iter(None).map_err(bad)?.enumerate() {
        let row = row.map_err(bad)?;
        let cells: Vec<Cell<'static>> = row
            .get_column_iter()
            .map(|(_, field)| match field {
                Field::Null => Cell::Null,
                Field::Byte(v) => Cell::Int(i64::from(*v)),
                Field::Short(v) => Cell::Int(i64::from(*v)),
                Field::Int(v) => Cell::Int(i64::from(*v)),
                Field::Long(v) => Cell::Int(*v),
                Field::UByte(v) => Cell::Int(i64::from(*v)),
                Field::UShort(v) => Cell::Int(i64::from(*v)),
                Field::UInt(v) => Cell::Int(i64::from(*v)),
                Field::ULong(v) => i64::try_from(*v).map_or(Cell::Null, Cell::Int),
                Field::Float(v) => Cell::Float(f64::from(*v)),
                Field::Double(v) => Cell::Float(*v),
                Field::Decimal(d) => parquet_decimal(d).map_or(Cell::Null, Cell::Decimal),
                Field::Str(s) => Cell::Text(Cow::Owned(s.clone())),
                Field::Date(days) => epoch(i64::from(*days) * 86_400).map_or(Cell::Null, Cell::Time),
                Field::TimestampMillis(ms) => {
                    DateTime::from_timestamp_millis(*ms).map_or(Cell::Null, |t| Cell::Time(t.fixed_offset()))
                }
                Field::TimestampMicros(us) => {
                    DateTime::from_timestamp_micros(*us).map_or(Cell::Null, |t| Cell::Time(t.fixed_offset()))
                }
                other => Cell::Text(Cow::Owned(other.to_string())),
            })
            .collect();
        table.push(i + 1, cells);
    }
    Ok(table)
}

/// A Parquet DECIMAL (big-endian two's complement unscaled value, scale) as a Decimal.
fn parquet_decimal(d: &parquet::data_type::Decimal) -> Option<Decimal> {
    let data = d.data();
    if data.is_empty() || data.len() > 16 {
        return None;
    }
    let fill = if data[0] & 0x80 != 0 { 0xFF } else { 0x00 };
    let mut buf = [fill; 16];
    buf[16 - data.len()..].copy_from_slice(data);
    Decimal::try_from_i128_with_scale(i128::from_be_bytes(buf), u32::try_from(d.scale()).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::load::{build, load_bytes};
    use crate::data::validate::CleanPolicy;

    /// A Parquet file of `groups` row groups (their row counts): millisecond timestamps, a FLOAT open with
    /// nulls, DOUBLE high/low, a DECIMAL(12, 5) INT64 close, an INT32 volume, an optional UTF8 symbol.
    fn parquet_file(groups: &[usize]) -> Vec<u8> {
        use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, FloatType, Int32Type, Int64Type};
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;
        use std::sync::Arc;
        let schema = Arc::new(
            parse_message_type(
                "message bars { required int64 time (TIMESTAMP(MILLIS,true)); optional float open; \
                 required double high; required double low; required int64 close (DECIMAL(12,5)); \
                 required int32 volume; optional binary symbol (UTF8); }",
            )
            .unwrap(),
        );
        let props = Arc::new(WriterProperties::builder().set_write_batch_size(4096).build());
        let mut buf = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut buf, schema, props).unwrap();
        let mut first = 0usize;
        for &n in groups {
            let rows = first..first + n;
            first += n;
            let defs: Vec<i16> = rows.clone().map(|i| i16::from(i % 97 != 5)).collect();
            let mut group = writer.next_row_group().unwrap();
            let times: Vec<i64> = rows.clone().map(|i| 1_483_315_200_000 + i as i64 * 3_600_000).collect();
            let open: Vec<f32> = rows.clone().filter(|i| i % 97 != 5).map(|i| 1.5 + (i % 7) as f32 * 0.125).collect();
            let high: Vec<f64> = rows.clone().map(|i| 2.5 + (i % 5) as f64 * 0.1).collect();
            let low: Vec<f64> = rows.clone().map(|i| 0.5 + (i % 3) as f64 * 0.01).collect();
            let close: Vec<i64> = rows.clone().map(|i| 150_000 + (i % 11) as i64 * 1_234).collect();
            let volume: Vec<i32> = rows.clone().map(|i| (i % 13) as i32).collect();
            let symbols: Vec<ByteArray> = rows
                .clone()
                .filter(|i| i % 97 != 5)
                .map(|i| ByteArray::from(if i < 1_000 { "AAA" } else { "BBB" }))
                .collect();
            macro_rules! column {
                ($t:ty, $values:expr, $defs:expr) => {{
                    let mut col = group.next_column().unwrap().unwrap();
                    col.typed::<$t>().write_batch(&$values, $defs, None).unwrap();
                    col.close().unwrap();
                }};
            }
            column!(Int64Type, times, None);
            column!(FloatType, open, Some(&defs[..]));
            column!(DoubleType, high, None);
            column!(DoubleType, low, None);
            column!(Int64Type, close, None);
            column!(Int32Type, volume, None);
            column!(ByteArrayType, symbols, Some(&defs[..]));
            group.close().unwrap();
        }
        writer.close().unwrap();
        buf
    }

    /// Timestamps read with the thread's last day are chrono's, in and out of range, within a day and
    /// across days and the epoch, in both units.
    #[test]
    fn stamps_read_as_chrono_reads_them() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut v: i64 = -3 * 86_400_000;
        for k in 0..200_000 {
            v = match k % 50 {
                0 => rng.random::<i64>(),
                1 => rng.random_range(-10i64.pow(17)..10i64.pow(17)),
                _ => v.wrapping_add(rng.random_range(0..4_000_000)),
            };
            assert_eq!(stamp_time(v, 1_000), DateTime::from_timestamp_millis(v), "{v} ms");
            assert_eq!(stamp_time(v, 1_000_000), DateTime::from_timestamp_micros(v), "{v} us");
        }
    }

    /// The column reader gives the row iterator's cells: the same series, bars and findings (row
    /// numbers included), across row groups and batches, with nulls, decimals and text.
    #[test]
    fn parquet_columns_read_as_the_rows_do() {
        let bytes = parquet_file(&[70_000, 3_000]);
        let by_columns = read_parquet("b.parquet", bytes::Bytes::copy_from_slice(&bytes)).unwrap();
        assert!(matches!(by_columns.storage, Storage::Columns(_)), "read by column");
        let by_rows = read_parquet_rows("b.parquet", &bytes).unwrap();
        assert_eq!(by_columns.rows, by_rows.rows);
        let (mut buf, mut by_rows_buf) = (Vec::new(), Vec::new());
        for i in [0, 5, 97 + 5, 65_535, 65_536, 69_999, 70_000, 72_999] {
            assert_eq!(by_columns.row_cells(i, &mut buf), by_rows.row_cells(i, &mut by_rows_buf), "row {i}");
        }
        let policy = CleanPolicy::default();
        let a = build("b.parquet", by_columns, "X", &policy, None);
        let b = build("b.parquet", by_rows, "X", &policy, None);
        let (a, b) = (a.map(|_| ()).expect_err("nulls are findings"), b.map(|_| ()).expect_err("nulls are findings"));
        assert_eq!(a.findings, b.findings);
        assert!(a.findings.iter().any(|f| f.row == Some(6) && f.column.as_deref() == Some("open")), "{a}");
        let lenient = CleanPolicy::parse(&["bad-number".to_owned()], &[]).unwrap();
        let (da, ra) = load_bytes("b.parquet", &bytes, "X", &lenient).unwrap();
        let rows = read_parquet_rows("b.parquet", &bytes).unwrap();
        let (db, rb) = build("b.parquet", rows, "X", &lenient, None).unwrap();
        assert_eq!((da.series.len(), ra.findings.len(), ra.dropped), (db.series.len(), rb.findings.len(), rb.dropped));
        for (x, y) in da.series.iter().zip(&db.series) {
            assert_eq!((&x.symbol, &x.bars), (&y.symbol, &y.bars));
        }
        assert_eq!(da.series[1].bars[0].close, Decimal::new(150_000 + (1_000 % 11) * 1_234, 5));
    }
}
