//! W0: market data in. The same seeded bars as a CSV file and as a Parquet file (double prices, an int64
//! volume, millisecond timestamps, snappy: what pandas' `to_parquet` writes), each loaded and validated
//! into Decimal bars as `tradesim data check FILE` does; the median of [`RUNS`] runs of each, interleaved.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use num_traits::ToPrimitive;

use super::end_to_end::{Scratch, write_csv};
use super::{Row, Sizes};
use crate::Error;
use crate::data::CleanPolicy;
use crate::data::synthetic::{GeneratorConfig, generate};

/// Timed loads of each file; the figure is the median.
const RUNS: usize = 7;

/// Writes `bars` seeded synthetic hourly bars (the bars of [`write_csv`]) as a Parquet file.
fn write_parquet(path: &Path, bars: usize) -> Result<(), Error> {
    use parquet::basic::Compression;
    use parquet::data_type::{DoubleType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let failed = |e: parquet::errors::ParquetError| Error::Output(format!("writing {}: {e}", path.display()));
    let data = generate(&GeneratorConfig { bars, symbols: 1, seed: 42, bar_seconds: 3_600 });
    let bars = &data.series[0].bars;
    let schema = parquet::schema::parser::parse_message_type(
        "message bars { required int64 time (TIMESTAMP(MILLIS,true)); required double open; required double high; \
         required double low; required double close; required int64 volume; }",
    )
    .map_err(failed)?;
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let file = std::fs::File::create(path).map_err(Error::io(path))?;
    let mut writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).map_err(failed)?;
    let mut group = writer.next_row_group().map_err(failed)?;
    let times: Vec<i64> = bars.iter().map(|b| b.time.timestamp_millis()).collect();
    let float = |d: rust_decimal::Decimal| d.to_f64().ok_or_else(|| Error::Output(format!("{d} is not a double")));
    let prices: [Vec<f64>; 4] = [
        bars.iter().map(|b| float(b.open)).collect::<Result<_, _>>()?,
        bars.iter().map(|b| float(b.high)).collect::<Result<_, _>>()?,
        bars.iter().map(|b| float(b.low)).collect::<Result<_, _>>()?,
        bars.iter().map(|b| float(b.close)).collect::<Result<_, _>>()?,
    ];
    let volumes: Vec<i64> = bars
        .iter()
        .map(|b| b.volume.to_i64().ok_or_else(|| Error::Output(format!("volume {} is not an integer", b.volume))))
        .collect::<Result<_, _>>()?;
    write_column::<Int64Type, _>(&mut group, &times).map_err(failed)?;
    for values in &prices {
        write_column::<DoubleType, _>(&mut group, values).map_err(failed)?;
    }
    write_column::<Int64Type, _>(&mut group, &volumes).map_err(failed)?;
    group.close().map_err(failed)?;
    writer.close().map_err(failed)?;
    Ok(())
}

/// Writes the next column of `group`: `values` of type `T`, no nulls.
fn write_column<T: parquet::data_type::DataType, W: std::io::Write + Send>(
    group: &mut parquet::file::writer::SerializedRowGroupWriter<'_, W>,
    values: &[T::T],
) -> parquet::errors::Result<()> {
    let mut column = group
        .next_column()?
        .ok_or_else(|| parquet::errors::ParquetError::General("the schema has fewer columns".into()))?;
    column.typed::<T>().write_batch(values, None, None)?;
    column.close()
}

/// W0 rows: the CSV and the Parquet file of `sizes.bars` bars, loaded and validated (median seconds).
pub fn load(sizes: &Sizes) -> Result<Vec<Row>, Error> {
    let dir = std::env::temp_dir().join(format!("tradesim-w0-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    let scratch = Scratch(dir);
    let files = [("CSV", scratch.0.join("bars.csv")), ("Parquet", scratch.0.join("bars.parquet"))];
    write_csv(&files[0].1, sizes.bars)?;
    write_parquet(&files[1].1, sizes.bars)?;
    let mut seconds = [Vec::new(), Vec::new()];
    for _ in 0..RUNS {
        for ((format, path), times) in files.iter().zip(&mut seconds) {
            let started = Instant::now();
            let (data, _) = crate::data::load_file(path, &CleanPolicy::default())?;
            times.push(started.elapsed().as_secs_f64());
            let loaded = data.series.iter().map(|s| s.bars.len()).sum::<usize>();
            if loaded != sizes.bars {
                return Err(Error::Output(format!("W0: {format} gave {loaded} bars of {}", sizes.bars)));
            }
        }
    }
    Ok(files
        .iter()
        .zip(&mut seconds)
        .map(|((format, path), times)| {
            times.sort_by(f64::total_cmp);
            let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
            Row::load(format, sizes.bars, times[RUNS / 2]).with_note(format!(
                "{:.1} MB; median of {RUNS} (fastest {:.3} s, slowest {:.3} s), interleaved with the other file; \
                 as `tradesim data check FILE`",
                bytes as f64 / 1e6,
                times[0],
                times[RUNS - 1]
            ))
        })
        .collect())
}
